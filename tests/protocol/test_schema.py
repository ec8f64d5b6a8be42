"""The generated schema directory is fresh, says each fact once, and what the daemon
really sends validates against it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import fastjsonschema
import pytest

from cleveragents._codegen import wire_errors
from cleveragents.protocol import BY_NAME, METHODS, ParamsError, structure, unstructure, wire
from cleveragents.protocol._schema import (
    DOCUMENT,
    METHOD_TABLE,
    SCHEMA_ID,
    markdown,
    method_table,
    plain,
    protocol_schema,
    render,
)
from cleveragents.tool import CleverAgentsError, ToolCallRecord, ToolError, ToolNotFoundError
from kit.rawpeer import RawDaemon

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "client-protocol" / "schema"


def _on_disk() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in SCHEMA_DIR.glob("*.json")}


def test_the_checked_in_schema_directory_is_up_to_date() -> None:
    expected = render(wire_errors())
    on_disk = _on_disk()
    stale = sorted(name for name in expected if on_disk.get(name) != expected[name])
    extra = sorted(set(on_disk) - set(expected))
    assert (stale, extra) == ([], []), "run scripts/gen-schema and commit the result"


def test_the_schema_directory_stays_small() -> None:
    """Each type is said once, in the document; a per-type file is only a ``$ref`` (the
    total grows with the wire itself, not with copies of it)."""
    on_disk = _on_disk()
    stubs = {n: t for n, t in on_disk.items() if n not in ("protocol.schema.json", "methods.json")}
    assert all(text.count("\n") <= 6 for text in stubs.values())
    assert sum(text.count("\n") for text in on_disk.values()) < 4000


def test_the_document_holds_every_type_once_under_defs_with_an_id() -> None:
    document = protocol_schema()
    assert document["$id"] == SCHEMA_ID
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    reachable = {m.params.__name__ for m in METHODS} | {
        m.result.__name__ for m in METHODS if m.result is not None
    }
    assert reachable <= set(document["$defs"])
    assert {"ToolCallRecord", "McpServerEntry", "InitializationOptions"} <= set(document["$defs"])


def test_each_per_type_file_is_only_a_ref_into_the_document() -> None:
    files = render([])
    defs = protocol_schema()["$defs"]
    stubs = {name: text for name, text in files.items() if name.endswith(".schema.json")}
    stubs.pop(DOCUMENT)
    assert set(stubs) == {f"{name}.schema.json" for name in defs}
    for name, text in stubs.items():
        stub = json.loads(text)
        type_name = name.removesuffix(".schema.json")
        assert stub["$ref"] == f"{DOCUMENT}#/$defs/{type_name}"
        assert set(stub) == {"$schema", "title", "$ref"}


def test_the_method_table_lists_every_method_with_refs_into_the_document() -> None:
    table = method_table([])
    defs = protocol_schema()["$defs"]
    assert [m["name"] for m in table["methods"]] == [m.name for m in METHODS]
    for entry in table["methods"]:
        method = BY_NAME[entry["name"]]
        assert (entry["kind"], entry["direction"]) == (method.kind, method.direction)
        assert entry["params"] == {"$ref": f"{DOCUMENT}#/$defs/{method.params.__name__}"}
        assert ("result" in entry) == (method.kind == "request")
        for key in ("params", "result"):
            if key in entry:
                assert entry[key]["$ref"].rsplit("/", 1)[1] in defs
    assert table["protocolVersion"] == 1
    assert [i["$ref"] for i in table["initialize"]] == [
        f"{DOCUMENT}#/$defs/InitializationOptions",
        f"{DOCUMENT}#/$defs/ClientCapabilitiesCleverAgents",
        f"{DOCUMENT}#/$defs/DaemonCapabilities",
    ]


def test_the_errors_table_lists_the_classes_it_is_given_by_code() -> None:
    table = method_table([ToolNotFoundError, ToolError])
    assert [(e["name"], e["code"]) for e in table["errors"]] == [
        ("ToolError", -32011),
        ("ToolNotFoundError", -32012),
    ]


def test_an_error_description_is_its_docstring_in_plain_text() -> None:
    fake = cast(
        "type[CleverAgentsError]",
        type("RunGone", (), {"code": -32099, "__doc__": "The run ``r`` ended.\n\nMore."}),
    )
    (entry,) = method_table([fake])["errors"]
    assert entry == {"name": "RunGone", "code": -32099, "description": "The run r ended."}


def test_every_error_class_on_the_wire_is_in_the_committed_table() -> None:
    table = json.loads((SCHEMA_DIR / METHOD_TABLE).read_text(encoding="utf-8"))
    codes = {e["name"]: e["code"] for e in table["errors"]}
    assert codes == {cls.__name__: cls.code for cls in wire_errors()}
    assert codes["ToolCancelledError"] == -32030


def test_restructuredtext_becomes_plain_text_and_markdown() -> None:
    doc = (
        "Cut for ``maxToolOutputBytes``; see :func:`~cleveragents.tool.run_tool_loop`\n   and `x`."
    )
    assert plain(doc) == "Cut for maxToolOutputBytes; see run_tool_loop and x."
    assert markdown(doc) == "Cut for `maxToolOutputBytes`; see `run_tool_loop` and `x`."


def _descriptions(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["description"]] if isinstance(node.get("description"), str) else []
        return own + [d for value in node.values() for d in _descriptions(value)]
    if isinstance(node, list):
        return [d for value in node for d in _descriptions(value)]
    return []


def test_descriptions_in_the_document_carry_no_markup() -> None:
    found = _descriptions(protocol_schema())
    assert len(found) > 150
    assert [d for d in found if "`" in d or ":func:" in d or ":class:" in d] == []


def test_a_fields_docstring_is_its_description() -> None:
    record = protocol_schema()["$defs"]["RunResult"]["properties"]["omittedRecords"]
    assert record["description"].startswith(
        "How many of the oldest records toolCallHistory leaves out"
    )
    assert record["markdownDescription"].startswith(
        "How many of the oldest records `toolCallHistory` leaves out"
    )


def test_the_core_record_carries_its_error_code_on_the_wire() -> None:
    record = protocol_schema()["$defs"]["ToolCallRecord"]
    assert record["properties"]["errorCode"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert "errorCode" in record["required"]


def test_fields_equal_to_their_default_are_still_sent() -> None:
    record = ToolCallRecord("t", {}, None, 0.0, False, None, 0, "")
    assert unstructure(record) == {
        "toolName": "t", "inputs": {}, "output": None, "durationMs": 0.0, "success": False,
        "error": None, "iteration": 0, "callId": "", "errorCode": None,
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
    """A validator of one type, read from the committed document as a client would."""
    document = json.loads((SCHEMA_DIR / DOCUMENT).read_text(encoding="utf-8"))
    return fastjsonschema.compile({"$ref": f"#/$defs/{name}", "$defs": document["$defs"]})


def test_the_validators_refuse_what_the_daemon_would_refuse() -> None:
    with pytest.raises(fastjsonschema.JsonSchemaException):
        _validator("McpServerEntry")({"name": "git", "comand": "uvx"})
    with pytest.raises(fastjsonschema.JsonSchemaException):
        _validator("ToolCallRecord")({"toolName": "t"})


async def test_a_real_runs_messages_validate_against_the_document(tmp_path: Path) -> None:
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
    failed = [r for r in reply["result"]["toolCallHistory"] if not r["success"]]
    assert [r["errorCode"] for r in failed] == [-32012]  # the unknown tool
    seen = set()
    for message in daemon.messages:
        method = BY_NAME.get(message.get("method", ""))
        if method is not None:
            _validator(method.params.__name__)(message["params"])
            seen.add(method.name)
    assert seen == {"run/started", "run/messageDelta", "run/toolCallStarted", "run/toolCall",
                    "run/iteration", "run/finished"}  # fmt: skip
