"""The transcript store and the output cap on a hostile state dir, in process: a FIFO,
a link to ``/dev/zero`` or a folder at a transcript's name is skipped, never waited on
nor read without end; a line is bounded; links planted at folders are refused; the run
index is a cache that cannot lie about a transcript; and no transcript, however
type-confused, makes a reader raise anything but the store's own errors."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents.runs._outputs import OutputCap
from cleveragents.statedir import StateDir
from cleveragents.transcripts import (
    META,
    RunInterruptedError,
    RunNotFoundError,
    RunStateError,
    TranscriptStore,
)
from cleveragents.transcripts import _files as transcript_files

STARTED_AT = "2026-01-01T00:00:00.000+00:00"


def _finished(store: TranscriptStore, run_id: str, prompt: str, status: str = "completed") -> None:
    transcript = store.claim(run_id)
    transcript.append(META, {"runId": run_id, "prompt": prompt, "startedAt": STARTED_AT})
    result = {"runId": run_id, "status": status, "content": "done", "toolCallHistory": [],
              "iterations": 1, "terminatedByLimit": False, "durationMs": 1.0}  # fmt: skip
    transcript.append("run/finished", {"runId": run_id, "seq": 2, "result": result})
    transcript.close()


def _within_5_s(work: Callable[[], Any]) -> Any:
    found: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            found.append(work())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            found.append(exc)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(5), "the store waited on a FIFO (or read without end)"
    return found[0]


def test_a_fifo_a_dev_zero_link_or_a_folder_at_a_run_s_name_never_blocks_the_store(
    tmp_path: Path,
) -> None:
    store = TranscriptStore(tmp_path / "state")
    _finished(store, "real", "the real prompt")
    runs = tmp_path / "state" / "runs"
    os.mkfifo(runs / "fifo.jsonl")
    (runs / "zero.jsonl").symlink_to("/dev/zero")
    (runs / "dir.jsonl").mkdir()
    for reader in (store, TranscriptStore(tmp_path / "state")):
        _reads_nothing_there(reader)
    transcript = _within_5_s(lambda: store.claim("after"))  # behind the store's lock once
    transcript.close()
    assert store.result("real")["status"] == "completed"


def _reads_nothing_there(store: TranscriptStore) -> None:
    assert [s["runId"] for s in _within_5_s(store.summaries)] == ["real"]
    for name in ("fifo", "zero", "dir"):
        assert isinstance(_within_5_s(partial(store.result, name)), RunNotFoundError)
        assert isinstance(_within_5_s(partial(store.conversation, name)), RunNotFoundError)
        assert _within_5_s(partial(store.is_live, name)) is False
        assert _within_5_s(partial(store.exists, name)) is False


def test_a_line_longer_than_the_bound_is_skipped_as_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript_files, "MAX_LINE_BYTES", 64 * 1024)
    store = TranscriptStore(tmp_path / "state")
    transcript = store.claim("long")
    transcript.append(META, {"runId": "long", "prompt": "p", "startedAt": STARTED_AT})
    transcript.append("run/iteration", {"runId": "long", "seq": 2, "iteration": 1,
                                        "content": "x" * (256 * 1024)})  # fmt: skip
    transcript.close()
    _finished(store, "short", "q")
    events = list(store.events("long"))
    assert [e["method"] for e in events] == [META]  # the long line read as torn
    assert store.result("long")["error"]["code"] == RunInterruptedError.code
    assert {s["runId"] for s in store.summaries()} == {"long", "short"}


def test_a_link_planted_at_the_runs_folder_is_refused_and_the_run_says_why(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "runs").symlink_to(outside)
    store = TranscriptStore(tmp_path / "state")
    transcript = store.claim("r1")
    message = transcript.failure_message()
    transcript.close()
    assert message is not None
    assert "not followed" in message
    assert list(outside.iterdir()) == []
    assert store.summaries() == []


def _index_rows(state: Path, status: str, prompt: str) -> dict[str, Any]:
    info = os.stat(state / "runs" / "real.jsonl")
    return {"real": [[info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns], status,
                     prompt, STARTED_AT, 9, 9]}  # fmt: skip


@pytest.mark.parametrize("form", ["unsigned", "forged", "older"])
def test_a_planted_run_index_cannot_misreport_a_real_run(tmp_path: Path, form: str) -> None:
    """The index is a cache of what the transcripts say: one the daemon did not sign (an
    older daemon's format with the right keys, a current one with a made-up signature)
    is dropped and rebuilt."""
    state = tmp_path / "state"
    store = TranscriptStore(state)
    _finished(store, "real", "the real prompt")
    assert store.summaries()[0]["status"] == "completed"  # the index is written
    rows = _index_rows(state, "failed", "a planted prompt")
    if form == "older":
        info = os.stat(state / "runs" / "real.jsonl")
        rows["real"][0] = [info.st_ino, info.st_size, info.st_mtime_ns]
        data = json.dumps({"version": 1, "runs": rows}).encode()
    else:
        body = json.dumps(rows).encode()
        mac = "0" * 64 if form == "forged" else None
        data = json.dumps({"version": 2, "mac": mac}).encode() + b"\n" + body
    (state / "run-index.json").unlink()
    (state / "run-index.json").write_bytes(data)
    (summary,) = TranscriptStore(state).summaries()
    assert (summary["status"], summary["prompt"]) == ("completed", "the real prompt")
    assert (summary["iterations"], summary["toolCallCount"]) == (1, 0)


def test_a_transcript_newer_than_the_index_is_read_again(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = TranscriptStore(state)
    _finished(store, "real", "the real prompt")
    assert store.summaries()[0]["status"] == "completed"
    path = state / "runs" / "real.jsonl"
    text = path.read_text().replace('"completed"', '"cancelled"')
    with path.open("r+") as handle:  # in place: the same inode, the same size
        handle.write(text)
    (summary,) = TranscriptStore(state).summaries()
    assert summary["status"] == "cancelled"


def test_the_index_a_daemon_signed_is_used_by_the_next_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = TranscriptStore(state)
    for n in range(3):
        _finished(store, f"r{n}", f"prompt {n}")
    store.summaries()
    head = (state / "run-index.json").read_bytes().split(b"\n", 1)[0]
    assert json.loads(head)["version"] == 2
    (state / "runs" / "r0.jsonl").write_bytes(b"")  # a change the next store must see
    summaries = {s["runId"]: s for s in TranscriptStore(state).summaries()}
    assert summaries["r1"]["prompt"] == "prompt 1"
    assert summaries["r0"]["status"] == "failed"  # nothing left of it: interrupted


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=8,
)  # fmt: skip
_KEYS = ("runId", "prompt", "startedAt", "continueFrom", "iteration", "content", "record",
         "result", "callId", "toolName", "inputs", "status", "toolCallHistory", "success",
         "output", "error", "iterations")  # fmt: skip
_METHODS = (META, "run/started", "run/toolCallStarted", "run/toolCall", "run/iteration",
            "run/finished", "$/assistant", "other")  # fmt: skip
_LINES = st.lists(
    st.tuples(st.sampled_from(_METHODS),
              st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=5) | _JSON),
    max_size=8,
)  # fmt: skip


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(lines=_LINES, parent=_LINES, continues=st.booleans())
def test_fuzz_type_confused_transcripts_read_as_torn_never_a_traceback(
    lines: list[tuple[str, Any]], parent: list[tuple[str, Any]], continues: bool
) -> None:
    """Every reader (``run/get``, ``run/list``, ``runs list|show``, ``continueFrom``)
    answers a transcript of lines of any shape with data or one of the store's errors."""
    with tempfile.TemporaryDirectory() as scratch:
        runs = Path(scratch) / "runs"
        runs.mkdir()
        for run_id, own in (("child", lines), ("parent", parent)):
            meta = {"runId": run_id, "prompt": "p", "startedAt": STARTED_AT,
                    "continueFrom": "parent" if continues and run_id == "child" else None}  # fmt: skip
            rows = [{"method": META, "params": meta}] + [
                {"method": method, "params": params} for method, params in own
            ]
            (runs / f"{run_id}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        store = TranscriptStore(Path(scratch))
        assert {s["runId"] for s in store.summaries()} == {"child", "parent"}
        for run_id in ("child", "parent"):
            assert isinstance(store.result(run_id), dict)
            assert isinstance(list(store.events(run_id)), list)
        with contextlib.suppress(RunNotFoundError, RunStateError, RunInterruptedError):
            store.conversation("child")


def test_a_cut_output_is_kept_0600_and_never_through_a_planted_link(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    cap = OutputCap(state, "run-1", 16)
    text = cap("t", "call/1", "x" * 100)
    assert isinstance(text, str)
    (kept,) = (tmp_path / "state" / "outputs" / "run-1").iterdir()
    assert str(kept) in text
    assert kept.read_text() == "x" * 100
    assert (kept.stat().st_mode & 0o777, kept.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "state" / "outputs" / "run-2").symlink_to(outside)
    text = OutputCap(state, "run-2", 16)("t", "c", "y" * 100)
    assert isinstance(text, str)
    assert "could not be kept" in text
    assert list(outside.iterdir()) == []


def test_what_a_run_keeps_on_disk_is_bounded(tmp_path: Path) -> None:
    """Past the run's budget an output is still cut, but no longer kept: a tool that
    answers its largest output in a loop cannot fill the disk (issue 25, item 2)."""
    state = StateDir(tmp_path / "state")
    cap = OutputCap(state, "run-1", 16, max_kept_bytes=250)
    texts = [cap("t", f"c{i}", "x" * 100) for i in range(3)]
    kept = sorted((tmp_path / "state" / "outputs" / "run-1").iterdir())
    assert [p.name for p in kept] == ["00001-c0.txt", "00002-c1.txt"]
    assert all(isinstance(t, str) and str(p) in t for t, p in zip(texts, kept, strict=False))
    last = texts[2]
    assert isinstance(last, str)
    assert last.startswith("x" * 16)
    assert "could not be kept (this run already keeps 200 bytes of outputs, at most 250)" in last
    assert cap.keep("c9", "t", "y" * 100) is None
    assert cap.keep("c9", "t", "y" * 50) is not None
