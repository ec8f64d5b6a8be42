"""Process lifecycle and persistence: EOF mid-run, transcripts read back after a restart."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kit.models import HANG, HANG_TOOL
from kit.rawpeer import RawDaemon


async def test_closing_stdin_mid_run_ends_the_process_and_closes_the_transcript(
    tmp_path: Path,
) -> None:
    (tmp_path / "ws").mkdir()
    daemon = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    try:
        await daemon.call(2, "tools/register", {"tools": [HANG_TOOL]})
        daemon.send({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                     "params": {"prompt": "go", "runId": "eof-run", "model": HANG}})  # fmt: skip
        while True:  # the daemon asks the client to run the tool; we never answer
            message = await daemon.next()
            if message.get("method") == "tools/call":
                break
        assert daemon.process.stdin is not None
        started = time.monotonic()
        daemon.process.stdin.close()
        assert await daemon.wait_exit(2) == 0
        assert time.monotonic() - started < 1.0
    finally:
        await daemon.kill()
    lines = (tmp_path / "state" / "runs" / "eof-run.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["method"] == "run/finished"
    assert last["params"]["result"]["status"] == "cancelled"


async def test_run_get_reads_a_transcript_back_after_a_restart(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "f.txt").write_text("content\n")
    model = {"provider": "scripted", "script": [
        {"content": "reading", "toolCalls": [{"name": "builtin/file-read", "arguments": {"path": "f.txt"}}]},
        {"content": "done"}]}  # fmt: skip
    first = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    try:
        reply = await first.call(
            2, "run/start", {"prompt": "read", "runId": "kept", "model": model}
        )
        result = reply["result"]
        await first.call(3, "shutdown", None)
        first.send({"jsonrpc": "2.0", "method": "exit"})
        await first.wait_exit()
    finally:
        await first.kill()
    second = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    try:
        again = await second.call(2, "run/get", {"runId": "kept"})
        assert again["result"] == result
        runs = (await second.call(3, "run/list", {}))["result"]["runs"]
        assert runs == [{"runId": "kept", "status": "completed", "prompt": "read",
                         "startedAt": runs[0]["startedAt"], "iterations": 2, "toolCallCount": 1,
                         "active": False}]  # fmt: skip
        # A finished run's id cannot be reused: its transcript is the record.
        reuse = await second.call(4, "run/start", {"prompt": "x", "runId": "kept", "model": model})
        assert reuse["error"]["code"] == -32023
    finally:
        await second.kill()


async def test_the_transcript_holds_every_notification_in_seq_order(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    model = {"provider": "scripted", "script": [
        {"content": "a", "toolCalls": [{"name": "builtin/file-list", "arguments": {}}]},
        {"content": "b"}]}  # fmt: skip
    daemon = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    try:
        await daemon.call(2, "run/start", {"prompt": "go", "runId": "t1", "model": model})
    finally:
        await daemon.kill()
    sent = [m for m in daemon.messages if m.get("method", "").startswith("run/")]
    lines = [json.loads(line) for line in
             (tmp_path / "state" / "runs" / "t1.jsonl").read_text().splitlines()]  # fmt: skip
    assert lines[0]["method"] == "$/meta"
    assert [{"method": e["method"], "params": e["params"]} for e in sent] == lines[1:]


async def test_a_torn_last_line_is_skipped_when_reading_back(tmp_path: Path) -> None:
    runs = tmp_path / "state" / "runs"
    runs.mkdir(parents=True)
    (tmp_path / "ws").mkdir()
    started = {"method": "run/started", "params": {"runId": "torn", "seq": 1, "sandboxRoot": "/w",
                                                   "maxIterations": 5, "tools": []}}  # fmt: skip
    (runs / "torn.jsonl").write_text(json.dumps(started) + '\n{"method": "run/toolCa')
    daemon = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    try:
        reply = await daemon.call(2, "run/get", {"runId": "torn"})
        assert reply["result"]["status"] == "failed"
        assert reply["result"]["error"]["code"] == -32028  # RunInterruptedError
    finally:
        await daemon.kill()


async def test_shutdown_mid_run_answers_the_run_with_its_result_first(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    daemon = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    try:
        await daemon.call(2, "tools/register", {"tools": [HANG_TOOL]})
        daemon.send({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                     "params": {"prompt": "go", "runId": "sd", "model": HANG}})  # fmt: skip
        while (await daemon.next()).get("method") != "tools/call":
            pass
        daemon.send({"jsonrpc": "2.0", "id": 4, "method": "shutdown"})
        run_reply = await daemon.reply_to(3)
        assert run_reply["result"]["status"] == "cancelled"
        shutdown_reply = await daemon.reply_to(4)
        assert shutdown_reply["result"] is None
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        assert await daemon.wait_exit(2) == 0
    finally:
        await daemon.kill()


async def test_files_instead_of_pipes_and_a_pipelined_exit_still_get_every_answer(
    tmp_path: Path,
) -> None:
    import asyncio
    import sys

    from cleveragents.client._connection import frame

    (tmp_path / "ws").mkdir()
    requests = tmp_path / "in.bin"
    requests.write_bytes(
        frame(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "processId": None,
                    "rootUri": (tmp_path / "ws").as_uri(),
                    "capabilities": {},
                },
            }
        )
        + frame({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        + frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
        + frame({"jsonrpc": "2.0", "method": "exit"})  # sent without waiting for replies
    )
    replies = tmp_path / "out.bin"
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cleveragents", "serve", "--state-dir", str(tmp_path / "s"),
            stdin=stdin, stdout=stdout,
        )  # fmt: skip
        async with asyncio.timeout(10):
            assert await process.wait() == 0
    bodies = [json.loads(part.split(b"\r\n\r\n", 1)[1]) for part in
              replies.read_bytes().split(b"Content-Length")[1:]]  # fmt: skip
    assert [b["id"] for b in bodies] == [1, 2, 3]


async def test_non_ascii_text_is_framed_by_its_byte_length(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    text = "héllo wörld ✓ 日本"
    model = {"provider": "scripted", "script": [{"content": text}]}
    daemon = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    try:
        reply = await daemon.call(2, "run/start", {"prompt": text, "model": model, "runId": "u"})
        again = await daemon.call(3, "run/get", {"runId": "u"})
    finally:
        await daemon.kill()
    assert reply["result"]["content"] == text
    assert again["result"]["content"] == text
    deltas = [m["params"]["text"] for m in daemon.messages if m.get("method") == "run/messageDelta"]
    assert deltas == [text]
