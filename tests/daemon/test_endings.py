"""Endings that lose nothing: signals, end of input, and exit without shutdown."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from kit.models import HANG, HANG_TOOL
from kit.rawpeer import RawDaemon


async def _mid_run(tmp_path: Path, run_id: str) -> RawDaemon:
    (tmp_path / "ws").mkdir(exist_ok=True)
    daemon = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    await daemon.call(2, "tools/register", {"tools": [HANG_TOOL]})
    daemon.send({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                 "params": {"prompt": "go", "runId": run_id, "model": HANG}})  # fmt: skip
    while (await daemon.next()).get("method") != "tools/call":
        pass
    return daemon


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
async def test_a_signal_cancels_every_run_answers_it_and_exits_with_its_code(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    daemon = await _mid_run(tmp_path, "sig")
    try:
        daemon.process.send_signal(sig)
        reply = await daemon.reply_to(3)
        result = reply["result"]
        assert result["status"] == "cancelled"
        assert sig.name in result["error"]["message"]
        finished = [m for m in daemon.messages if m.get("method") == "run/finished"]
        assert finished[0]["params"]["result"]["status"] == "cancelled"
        assert await daemon.wait_exit() == code
        last = json.loads((tmp_path / "state" / "runs" / "sig.jsonl").read_text().splitlines()[-1])
        assert last["method"] == "run/finished"
        assert sig.name in last["params"]["result"]["error"]["message"]
        log = await daemon.stderr()
        assert "Traceback" not in log
        assert "KeyboardInterrupt" not in log
    finally:
        await daemon.kill()


async def test_exit_without_shutdown_answers_the_runs_then_exits_1(tmp_path: Path) -> None:
    daemon = await _mid_run(tmp_path, "ex")
    try:
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        reply = await daemon.reply_to(3)
        assert reply["result"]["status"] == "cancelled"
        assert await daemon.wait_exit() == 1
    finally:
        await daemon.kill()


async def test_end_of_input_flushes_the_last_run_finished(tmp_path: Path) -> None:
    daemon = await _mid_run(tmp_path, "eof")
    try:
        assert daemon.process.stdin is not None
        daemon.process.stdin.close()
        reply = await daemon.reply_to(3)
        assert reply["result"]["status"] == "cancelled"
        assert any(m.get("method") == "run/finished" for m in daemon.messages)
        assert await daemon.wait_exit() == 0
    finally:
        await daemon.kill()
