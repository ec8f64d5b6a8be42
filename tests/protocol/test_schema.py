"""Generated schemas are fresh, and what the daemon really sends validates against them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest

from cleveragents.protocol import BY_NAME, METHODS, ParamsError, structure, unstructure, wire
from cleveragents.protocol._schema import protocol_schema, render
from cleveragents.tool import ToolCallRecord

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "client-protocol" / "schema"


def test_the_checked_in_schemas_are_up_to_date() -> None:
    expected = render()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in SCHEMA_DIR.glob("*.schema.json")}
    stale = sorted(name for name in expected if on_disk.get(name) != expected[name])
    extra = sorted(set(on_disk) - set(expected))
    assert (stale, extra) == ([], []), "run scripts/gen-schema and commit the result"


def test_every_method_has_params_and_requests_have_results() -> None:
    document = protocol_schema()
    for method in METHODS:
        entry = document["methods"][method.name]
        assert "$ref" in entry["params"]
        assert ("result" in entry) == (method.kind == "request")


def test_fields_equal_to_their_default_are_still_sent() -> None:
    record = ToolCallRecord("t", {}, None, 0.0, False, None, 0, "")
    assert unstructure(record) == {
        "toolName": "t", "inputs": {}, "output": None, "durationMs": 0.0, "success": False,
        "error": None, "iteration": 0, "callId": "",
    }  # fmt: skip


def test_optional_fields_are_left_out_when_absent() -> None:
    result = wire.RunResult("r", "completed", "", [], 1, False, 2.0)
    assert "error" not in unstructure(result)
    assert "usage" not in unstructure(result)


def test_wire_types_round_trip() -> None:
    params = wire.RunParams("p", run_id="r", max_iterations=3, tools=["a"], model={"provider": "client"},
                            work_done_token=7, resource_bindings={"x": 1})  # fmt: skip
    assert structure(unstructure(params), wire.RunParams) == params


def test_structuring_is_strict_about_json_types() -> None:
    with pytest.raises(ParamsError, match=r"^params.maxIterations: expected an integer"):
        structure({"prompt": "x", "maxIterations": True}, wire.RunParams)
    with pytest.raises(
        ParamsError, match=r"^params.tools\[0\].inputSchema: required field missing"
    ):
        structure({"tools": [{"name": "a", "description": "d"}]}, wire.RegisterToolsParams)


def test_a_value_outside_a_literal_lists_the_allowed_ones() -> None:
    options = {"profiles": {"m": {"read": "maybe", "write": "ask", "execute": "deny"}}}
    with pytest.raises(ParamsError) as info:
        structure(options, wire.InitializationOptions, root="initializationOptions")
    assert str(info.value) == (
        "initializationOptions.profiles['m'].read: expected one of 'allow', 'ask', 'deny'"
    )


def _validator(name: str) -> Any:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    schema.pop("$schema")
    return fastjsonschema.compile(schema)


async def test_a_real_runs_messages_validate_against_the_schemas(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))
    from rawpeer import RawDaemon

    (tmp_path / "ws").mkdir()
    model = {"provider": "scripted", "script": [
        {"content": "a", "toolCalls": [{"name": "builtin/file-list", "arguments": {}},
                                       {"name": "nope", "arguments": {"x": 1}}]},
        {"content": "b"}]}  # fmt: skip
    daemon = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    try:
        reply = await daemon.call(2, "run/start", {"prompt": "go", "model": model})
        tools = await daemon.call(3, "tools/list", {})
        runs = await daemon.call(4, "run/list", {})
    finally:
        await daemon.kill()
    _validator("RunResult")(reply["result"])
    _validator("ListToolsResult")(tools["result"])
    _validator("RunListResult")(runs["result"])
    seen = set()
    for message in daemon.messages:
        method = BY_NAME.get(message.get("method", ""))
        if method is not None:
            _validator(method.params.__name__)(message["params"])
            seen.add(method.name)
    assert seen == {"run/started", "run/messageDelta", "run/toolCallStarted", "run/toolCall",
                    "run/iteration", "run/finished"}  # fmt: skip
