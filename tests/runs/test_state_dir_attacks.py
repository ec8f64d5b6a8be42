"""The state dir attacked while the real daemon and the real ``cleveragents runs`` read it:
a FIFO and a link to ``/dev/zero`` at run names, and a planted ``run-index.json``. The
daemon keeps answering ``run/list`` and ``tools/list`` (median within 100 ms), starts
runs, and reports the real run as its transcript says; ``runs list`` returns."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

from cleveragents.transcripts import META, RunNotFoundError, TranscriptStore
from kit.cli import cli
from kit.models import DONE
from kit.probes import assert_responsive, probe_latencies
from kit.rawpeer import RawDaemon

STARTED_AT = "2026-01-01T00:00:00.000+00:00"


def _attacked_state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    store = TranscriptStore(state)
    transcript = store.claim("real")
    transcript.append(META, {"runId": "real", "prompt": "the real prompt", "startedAt": STARTED_AT})
    result = {"runId": "real", "status": "completed", "content": "done", "toolCallHistory": [],
              "iterations": 1, "terminatedByLimit": False, "durationMs": 1.0}  # fmt: skip
    transcript.append("run/finished", {"runId": "real", "seq": 2, "result": result})
    transcript.close()
    runs = state / "runs"
    os.mkfifo(runs / "fifo.jsonl")
    (runs / "zero.jsonl").symlink_to("/dev/zero")
    info = os.stat(runs / "real.jsonl")
    key = [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    body = json.dumps({"real": [key, "failed", "a planted prompt", STARTED_AT, 9, 9]}).encode()
    head = json.dumps({"version": 2, "mac": "0" * 64}).encode()
    (state / "run-index.json").write_bytes(head + b"\n" + body)
    return state


async def test_the_daemon_keeps_answering_and_tells_the_truth_on_an_attacked_state_dir(
    tmp_path: Path,
) -> None:
    state = _attacked_state(tmp_path)
    (tmp_path / "ws").mkdir()
    daemon = await RawDaemon.start(tmp_path / "ws", state)
    ids = itertools.count(10)
    try:

        async def run_list() -> None:
            reply = await daemon.call(next(ids), "run/list", {})
            runs = {r["runId"]: r for r in reply["result"]["runs"]}
            assert "fifo" not in runs
            assert "zero" not in runs
            assert (runs["real"]["status"], runs["real"]["prompt"]) == (
                "completed", "the real prompt"
            )  # fmt: skip

        async def tools_list() -> None:
            reply = await daemon.call(next(ids), "tools/list", {})
            assert reply["result"]["tools"]

        assert_responsive(await probe_latencies(run_list))
        assert_responsive(await probe_latencies(tools_list))
        started = await daemon.call(next(ids), "run/start", {"prompt": "go", "model": DONE})
        assert started["result"]["status"] == "completed"
        assert_responsive(await probe_latencies(run_list))
        for name in ("fifo", "zero"):
            reply = await daemon.call(next(ids), "run/get", {"runId": name})
            assert reply["error"]["code"] == RunNotFoundError.code
    finally:
        await daemon.kill()


def test_runs_list_and_show_return_on_an_attacked_state_dir(tmp_path: Path) -> None:
    state = _attacked_state(tmp_path)
    listed = cli(tmp_path, "runs", "list", "--json", "--state-dir", str(state))
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert (run["runId"], run["status"], run["prompt"]) == ("real", "completed", "the real prompt")
    shown = cli(tmp_path, "runs", "show", "fifo", "--state-dir", str(state))
    assert shown.returncode == 1
    assert "unknown run 'fifo'" in shown.stderr
    assert "Traceback" not in shown.stderr
