"""The LSP face and the ACP face are two maps of one run service: the same scripted run
through each (real subprocesses, one workspace) gives the same records, the same
transcript lines and the same RunResult, up to what is the run's own (its id, times,
durations)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kit.acp import AcpClient, serve_command
from kit.models import call
from kit.rawpeer import RawDaemon

TURNS = [
    {"content": "Reading.", "toolCalls": [call("builtin/file-read", path="notes.txt")]},
    {"content": "Listing.", "toolCalls": [call("builtin/file-list", path=".")]},
    {"content": "Again.", "toolCalls": [call("builtin/file-read", path="missing.txt")]},
    {"content": "You need milk."},
]  # fmt: skip
MODEL = {"provider": "scripted", "script": TURNS}
"""One call per iteration: a run's records are sent in completion order, which two
parallel calls need not keep from one run to the next."""
VARYING = {"runId", "durationMs", "duration_ms", "startedAt"}


def same_shape(value: Any) -> Any:
    """The value without what differs between two runs of one script."""
    if isinstance(value, dict):
        return {k: same_shape(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        return [same_shape(v) for v in value]
    return value


def transcript(state: Path, run_id: str) -> list[dict[str, Any]]:
    lines = (state / "runs" / f"{run_id}.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    meta, *rest = events
    assert meta["method"] == "$/meta"
    return [same_shape(event) for event in rest]


def workspace(tmp_path: Path) -> Path:
    """One workspace for both faces (outputs name absolute paths)."""
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    (root / "notes.txt").write_text("buy milk\n")
    return root.resolve()


async def lsp_run(tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    state = tmp_path / "lsp-state"
    daemon = await RawDaemon.start(workspace(tmp_path), state)
    try:
        reply = await daemon.call(2, "run/start", {"prompt": "What do I need?", "model": MODEL,
                                                   "runId": "lsp-run"})  # fmt: skip
        result = reply["result"]
    finally:
        await daemon.kill()
    return result, transcript(state, "lsp-run")


async def acp_run(tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    state = tmp_path / "acp-state"
    client = await AcpClient(serve_command(MODEL, state, "--profile", "trusted")).start()
    try:
        await client.initialize()
        session = (await client.new_session(workspace(tmp_path)))["sessionId"]
        assert await client.prompt(session, "What do I need?") == {"stopReason": "end_turn"}
    finally:
        await client.close()
    (path,) = (state / "runs").glob("*.jsonl")
    run_id = path.stem
    finished = json.loads(path.read_text().splitlines()[-1])
    return finished["params"]["result"], transcript(state, run_id)


async def test_one_scripted_run_gives_the_same_records_transcript_and_result_on_both_faces(
    tmp_path: Path,
) -> None:
    async with asyncio.timeout(60):
        lsp_result, lsp_lines = await lsp_run(tmp_path)
        acp_result, acp_lines = await acp_run(tmp_path)
    assert lsp_result["status"] == "completed"
    assert lsp_result["iterations"] == 4
    assert len(lsp_result["toolCallHistory"]) == 3
    assert [r["success"] for r in lsp_result["toolCallHistory"]] == [True, True, False]
    assert same_shape(acp_result) == same_shape(lsp_result)
    assert [line["method"] for line in acp_lines] == [line["method"] for line in lsp_lines]
    assert acp_lines == lsp_lines
