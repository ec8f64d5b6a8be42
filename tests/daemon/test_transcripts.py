"""Transcripts that survive: torn lines, interrupted runs, exclusive claims, failed writes,
and the run/list index."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cleveragents.transcripts import (
    META,
    PROMPT_SUMMARY_MAX,
    RunInterruptedError,
    RunStateError,
    TranscriptStore,
    valid_run_id,
)

STARTED = {"runId": "r", "seq": 1, "sandboxRoot": "/w", "maxIterations": 5, "tools": []}


def _write(store: TranscriptStore, run_id: str, tail: bytes = b"") -> None:
    transcript = store.claim(run_id)
    transcript.append(META, {"runId": run_id, "prompt": "p" * 500, "startedAt":
                             "2026-01-01T00:00:00.000+00:00"})  # fmt: skip
    transcript.append("run/started", {**STARTED, "runId": run_id})
    transcript.close()
    with (store.runs_dir / f"{run_id}.jsonl").open("ab") as handle:
        handle.write(tail)


@pytest.mark.parametrize(
    "tail",
    [b'{"method":"run/toolCall","params":{"x":"\xc3', b"\xff\xfe garbage", b"[" * 5000,
     b'{"method":"run/iteration","params":{"iteration":NaN}}'],
)  # fmt: skip
def test_a_torn_or_undecodable_last_line_reads_as_interrupted(tmp_path: Path, tail: bytes) -> None:
    store = TranscriptStore(tmp_path)
    _write(store, "torn", tail)
    result = store.result("torn")
    assert result["status"] == "failed"
    assert result["error"]["code"] == RunInterruptedError.code
    assert result["durationMs"] > 0  # up to the last write, not 0
    (summary,) = store.summaries()
    assert summary["runId"] == "torn"
    assert summary["status"] == "failed"
    assert len(summary["prompt"]) == PROMPT_SUMMARY_MAX


def test_a_run_id_is_claimed_exclusively_across_stores(tmp_path: Path) -> None:
    first, second = TranscriptStore(tmp_path), TranscriptStore(tmp_path)
    live = first.claim("one")
    live.append(META, {"runId": "one", "prompt": "p", "startedAt": "2026-01-01T00:00:00+00:00"})
    live.append("run/started", {**STARTED, "runId": "one"})
    with pytest.raises(RunStateError):
        second.claim("one")
    with pytest.raises(RunStateError):
        second.result("one")  # live elsewhere: not "failed"
    live.close()
    assert second.result("one")["status"] == "failed"  # the lock is gone: interrupted


def test_a_transcript_that_cannot_be_written_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    transcript = TranscriptStore(blocker / "state").claim("r1")  # its dir cannot exist
    transcript.append("run/started", STARTED)
    message = transcript.failure_message()
    assert message is not None
    assert str(blocker / "state") in message
    transcript.close()


def test_a_full_disk_stops_writing_and_is_reported(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    transcript = TranscriptStore(tmp_path).claim("full")
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, transcript._fd)  # type: ignore[arg-type]  # the next write gets ENOSPC
    finally:
        os.close(full)
    transcript.append("run/started", STARTED)
    message = transcript.failure_message()
    assert message is not None
    assert "28" in message  # ENOSPC
    transcript.close()


def test_the_index_follows_files_added_and_removed_behind_it(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path)
    _write(
        store,
        "a",
        b'{"method":"run/finished","params":{"result":{"runId":"a","status":"completed"}}}\n',
    )
    assert [s["runId"] for s in store.summaries()] == ["a"]
    _write(TranscriptStore(tmp_path), "b")
    assert sorted(s["runId"] for s in store.summaries()) == ["a", "b"]
    (store.runs_dir / "a.jsonl").unlink()
    assert [s["runId"] for s in store.summaries()] == ["b"]
    line = json.loads((store.runs_dir / "b.jsonl").read_text().splitlines()[0])
    assert line["method"] == META


@pytest.mark.parametrize(("run_id", "ok"), [("a", True), ("a.b-c_d", True), ("a\n", False),
                                            (".", False), ("..", False), ("a/b", False),
                                            ("x" * 129, False), ("", False)])  # fmt: skip
def test_run_ids_match_the_whole_pattern(run_id: str, ok: bool) -> None:
    assert valid_run_id(run_id) is ok
