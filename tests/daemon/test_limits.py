"""Limits of what the daemon writes and reads: the tool output cap (through the real
daemon), non-finite tool outputs, and a frame over 64 MiB sent to the real daemon."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from cleveragents.protocol import MAX_BODY
from cleveragents.runs import RunObserver, RunRequest, RunService, RunSettings
from cleveragents.tool import ToolError, ToolSpec
from kit.models import client_tool
from kit.rawpeer import LLM_CAPABILITIES, RawDaemon, serve

OBJECT = {"type": "object"}
MiB = 1024 * 1024


def _notified(daemon: RawDaemon, method: str) -> list[dict[str, Any]]:
    return [m["params"] for m in daemon.messages if m.get("method") == method]


def _kept_file(output: str) -> Path:
    """The file a cut output names (the only absolute path in it)."""
    (found,) = re.findall(r"(/\S+\.(?:json|txt))\]", output)
    return Path(found)


# -- the output cap --------------------------------------------------------------------

CAP = 1000
BIG_TEXT = "ü" * 3000  # 6,000 UTF-8 bytes
BIG_JSON = {"rows": [{"n": n, "text": "row"} for n in range(300)]}
OUTPUTS = {"client/text": BIG_TEXT, "client/json": BIG_JSON, "client/small": "fine"}


async def test_an_output_over_the_cap_is_cut_for_the_record_the_notifications_and_the_model(
    workspace: Path, state_dir: Path
) -> None:
    daemon = await RawDaemon.start(
        workspace, state_dir, capabilities=LLM_CAPABILITIES, options={"maxToolOutputBytes": CAP}
    )
    generate: list[dict[str, Any]] = []

    def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "tools/call":
            return {"output": OUTPUTS[params["name"]]}
        assert method == "llm/generate"
        generate.append(params)
        if params["iteration"] > 1:
            return {"content": "done", "toolCalls": []}
        calls = [{"id": f"c{n}", "name": name, "arguments": {}} for n, name in enumerate(OUTPUTS)]
        return {"content": "calling", "toolCalls": calls}

    try:
        await daemon.call(2, "tools/register", {"tools": [client_tool(name) for name in OUTPUTS]})
        daemon.send({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                     "params": {"prompt": "go", "runId": "cap", "model": "client"}})  # fmt: skip
        result = (await serve(daemon, 3, answer))["result"]
    finally:
        await daemon.kill()
    assert result["status"] == "completed"
    records = {r["toolName"]: r for r in result["toolCallHistory"]}
    notified = {p["record"]["toolName"]: p["record"] for p in _notified(daemon, "run/toolCall")}
    model_saw = {m["toolCallId"]: m["content"] for m in generate[1]["messages"]
                 if m["role"] == "tool"}  # fmt: skip
    assert records["client/small"]["output"] == "fine"
    assert model_saw["c2"] == "fine"
    for call_id, name in (("c0", "client/text"), ("c1", "client/json")):
        output = records[name]["output"]
        assert isinstance(output, str)
        assert len(output.encode()) < CAP + 300  # the head, and one line saying where the rest is
        assert notified[name]["output"] == output
        assert model_saw[call_id] == output
        kept = _kept_file(output)
        assert kept.is_absolute()
        assert kept.parent == state_dir / "outputs" / "cap"
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert str(kept.stat().st_size) in output  # the full size, in bytes
    text_file = _kept_file(records["client/text"]["output"])
    assert text_file.read_bytes() == BIG_TEXT.encode()
    assert text_file.stat().st_size == 6000
    assert records["client/text"]["output"].startswith("ü" * (CAP // 2))  # cut by bytes
    assert json.loads(_kept_file(records["client/json"]["output"]).read_bytes()) == BIG_JSON


async def test_the_default_cap_is_one_mebibyte(workspace: Path, state_dir: Path) -> None:
    sizes = {"client/at-cap": MiB, "client/over-cap": MiB + 1}
    model = {"provider": "scripted", "script": [
        {"content": "a", "toolCalls": [{"name": name, "arguments": {}} for name in sizes]},
        {"content": "b"}]}  # fmt: skip
    daemon = await RawDaemon.start(workspace, state_dir)
    try:
        await daemon.call(2, "tools/register", {"tools": [client_tool(name) for name in sizes]})
        daemon.send({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                     "params": {"prompt": "go", "runId": "default", "model": model}})  # fmt: skip
        reply = await serve(daemon, 3, lambda _m, p: {"output": "a" * sizes[p["name"]]})
    finally:
        await daemon.kill()
    records = {r["toolName"]: r["output"] for r in reply["result"]["toolCallHistory"]}
    assert records["client/at-cap"] == "a" * MiB
    over = records["client/over-cap"]
    assert len(over) < MiB + 300
    assert _kept_file(over).stat().st_size == MiB + 1


@pytest.mark.parametrize(
    "output", [float("nan"), float("inf"), {"x": [1.5, float("-inf")]}], ids=repr
)
async def test_a_non_finite_tool_output_fails_its_record_and_never_reaches_the_wire(
    tmp_path: Path, output: Any
) -> None:
    spec = ToolSpec("test/non-finite", "Returns what JSON cannot carry.", OBJECT,
                    lambda _inputs: output, blocking=False)  # fmt: skip
    sent: list[str] = []

    class Observer:
        def on_event(self, event: Any, text: str | None, /) -> None:
            if text is not None:
                sent.append(text)

    observer: RunObserver = Observer()
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(tmp_path),))
    service = RunService(settings, [spec])
    model = {"provider": "scripted", "script": [
        {"content": "a", "toolCalls": [{"name": "test/non-finite", "arguments": {}}]},
        {"content": "b"}]}  # fmt: skip
    handle = await service.start(
        RunRequest(prompt="go", run_id="nf", model=model, automation_profile="trusted"), observer
    )
    result = await handle.result()
    (record,) = result.tool_call_history
    assert record.success is False
    assert record.output is None
    assert record.error is not None
    assert record.error_code == ToolError.code
    assert "non-finite" in record.error  # the code is generic: the text says why
    # What was sent and written is JSON: no NaN or Infinity literal anywhere.
    for text in sent:
        json.loads(text, parse_constant=_not_json)
    transcript = (tmp_path / "state" / "runs" / "nf.jsonl").read_text()
    for line in transcript.splitlines():
        json.loads(line, parse_constant=_not_json)


def _not_json(name: str) -> Any:
    raise AssertionError(f"{name} in a transcript")


# -- a frame over the limit ------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_a_frame_over_64_mib_is_skipped_and_the_next_request_is_answered(
    workspace: Path, state_dir: Path
) -> None:
    size = 70_000_000
    assert size > MAX_BODY
    head = b'{"jsonrpc":"2.0","id":99,"method":"tools/list","params":{"pad":"'
    huge = head + b"a" * (size - len(head) - 3) + b'"}}'
    assert json.loads(huge)["method"] == "tools/list"  # served, were it not for its size
    daemon = await RawDaemon.start(workspace, state_dir)
    try:
        await daemon.call(2, "tools/list", {})
        before = _rss_kib(daemon.process.pid)
        daemon.send_body(huge)
        assert daemon.process.stdin is not None
        await daemon.process.stdin.drain()
        reply = await daemon.call(3, "tools/list", {})
        assert reply["result"]["tools"]
        assert all(m.get("id") != 99 for m in daemon.messages)  # skipped, not served
        # Skipped bytes are dropped as they are read: never held whole.
        assert _rss_kib(daemon.process.pid) - before < 32 * 1024
    finally:
        await daemon.kill()
    assert "bad frame header" in await daemon.stderr()
