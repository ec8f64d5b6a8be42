"""The state dir through the real daemon: one that cannot be written, two daemons on one,
a transcript torn inside a UTF-8 character, and a second ``initialize`` that must not
switch it."""

from __future__ import annotations

import errno
import json
from pathlib import Path

from kit.models import DONE, HANG, HANG_TOOL
from kit.rawpeer import RawDaemon


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_an_unwritable_state_dir_fails_the_run_naming_it_and_still_sends_run_finished(
    workspace: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way\n")  # root ignores modes, but not a file in the path
    state = blocker / "state"
    daemon = await RawDaemon.start(workspace, state)
    try:
        reply = await daemon.call(2, "run/start", {"prompt": "go", "runId": "r", "model": DONE})
        listed = await daemon.call(3, "tools/list", {})
    finally:
        await daemon.kill()
    result = reply["result"]
    assert result["status"] == "failed"
    assert result["error"]["code"] == -32029  # StateDirError
    assert str(state) in result["error"]["message"]
    assert f"[Errno {errno.ENOTDIR}]" in result["error"]["message"]
    finished = [m["params"] for m in daemon.messages if m.get("method") == "run/finished"]
    assert [f["result"] for f in finished] == [result]
    assert "result" in listed  # and the daemon goes on


async def test_a_second_daemon_refuses_a_live_run_id_and_reports_it_active_elsewhere(
    workspace: Path, state_dir: Path
) -> None:
    first = await RawDaemon.start(workspace, state_dir)
    second = await RawDaemon.start(workspace, state_dir)
    try:
        await first.call(2, "tools/register", {"tools": [HANG_TOOL]})
        first.send({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                    "params": {"prompt": "go", "runId": "shared", "model": HANG}})  # fmt: skip
        while (await first.next()).get("method") != "tools/call":
            pass
        taken = await second.call(2, "run/start", {"prompt": "x", "runId": "shared",
                                                   "model": DONE})  # fmt: skip
        assert taken["error"]["code"] == -32023  # RunStateError
        elsewhere = await second.call(3, "run/get", {"runId": "shared"})
        assert "result" not in elsewhere  # not read back as "failed": it is live
        assert elsewhere["error"]["code"] == -32023
        runs = (await second.call(4, "run/list", {}))["result"]["runs"]
        assert [(r["runId"], r["status"], r["active"]) for r in runs] == [
            ("shared", "running", True)
        ]
        first.send({"jsonrpc": "2.0", "id": 4, "method": "run/cancel",
                    "params": {"runId": "shared"}})  # fmt: skip
        assert (await first.reply_to(3))["result"]["status"] == "cancelled"
        after = await second.call(5, "run/get", {"runId": "shared"})
        assert after["result"]["status"] == "cancelled"  # the lock is gone: read back
    finally:
        await first.kill()
        await second.kill()
    lines = _lines(state_dir / "runs" / "shared.jsonl")
    assert [line["method"] for line in lines].count("$/meta") == 1  # never interleaved


async def test_a_transcript_torn_inside_a_utf8_character_breaks_neither_run_list_nor_run_get(
    workspace: Path, state_dir: Path
) -> None:
    runs = state_dir / "runs"
    runs.mkdir(parents=True)
    meta = {"method": "$/meta", "params": {"runId": "torn", "prompt": "héllo",
                                           "startedAt": "2026-01-01T00:00:00.000+00:00"}}  # fmt: skip
    started = {"method": "run/started", "params": {"runId": "torn", "seq": 1, "sandboxRoot": "/w",
                                                   "maxIterations": 5, "tools": []}}  # fmt: skip
    head = (json.dumps(meta) + "\n" + json.dumps(started) + "\n").encode()
    torn = '{"method":"run/toolCall","params":{"runId":"torn","text":"é'.encode()[:-1]
    assert torn.endswith(b"\xc3")  # half of "é"
    (runs / "torn.jsonl").write_bytes(head + torn)
    first = await RawDaemon.start(workspace, state_dir)
    try:
        await first.call(2, "run/start", {"prompt": "ok", "runId": "fine", "model": DONE})
    finally:
        await first.kill()
    daemon = await RawDaemon.start(workspace, state_dir)  # a fresh process on that state dir
    try:
        listed = await daemon.call(2, "run/list", {})
        again = await daemon.call(3, "run/list", {})
        torn_run = await daemon.call(4, "run/get", {"runId": "torn"})
        fine_run = await daemon.call(5, "run/get", {"runId": "fine"})
    finally:
        await daemon.kill()
    statuses = {r["runId"]: r["status"] for r in listed["result"]["runs"]}
    assert statuses == {"torn": "failed", "fine": "completed"}
    assert again["result"] == listed["result"]
    assert torn_run["result"]["status"] == "failed"
    assert torn_run["result"]["error"]["code"] == -32028  # RunInterruptedError
    assert fine_run["result"]["status"] == "completed"


async def test_a_second_initialize_is_refused_and_keeps_the_first_state_dir(
    workspace: Path, tmp_path: Path
) -> None:
    first, other = tmp_path / "first", tmp_path / "other"
    daemon = await RawDaemon.start(workspace, tmp_path / "cli", options={"stateDir": str(first)})
    try:
        again = await daemon.call(2, "initialize", {
            "processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
            "initializationOptions": {"stateDir": str(other)}})  # fmt: skip
        assert again["error"]["code"] == -32600
        reply = await daemon.call(3, "run/start", {"prompt": "go", "runId": "r", "model": DONE})
    finally:
        await daemon.kill()
    assert reply["result"]["status"] == "completed"
    assert _lines(first / "runs" / "r.jsonl")[-1]["method"] == "run/finished"
    assert not other.exists()
