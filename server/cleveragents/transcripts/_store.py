"""``TranscriptStore``: the transcripts of one state dir, claimed, read back and listed.

Claiming
    ``claim`` creates the file exclusively and holds its lock until the transcript is
    closed (see ``_files``). A second store (another daemon on the same state dir) sees
    the lock: ``result`` raises ``RunStateError`` ("active in another process") and
    ``summaries`` lists the run as ``running``. A full disk, a read-only or uncreatable
    state dir never raise from ``claim`` (only a taken id does): the transcript records
    the ``OSError`` and its writes become no-ops.

Reading
    Files are opened beneath the state dir's pinned descriptor without following a link,
    regular files only (a FIFO or a device planted at a run's name is skipped, never
    waited on), read in binary and decoded line by line; a line that is not UTF-8, not
    JSON, too deeply nested, longer than ``MAX_LINE_BYTES`` or not of its wire shape is
    skipped. A run with no ``run/finished`` line and no
    live writer was interrupted: it reads ``failed`` with ``RunInterruptedError``'s
    code and a ``durationMs`` from ``$/meta.startedAt`` to the file's mtime (the time
    of its last write, hence of its last event).

The results and summaries it returns are wire data (``RunResult`` and ``RunSummary``
dicts, as ``client-protocol/PROTOCOL.md`` describes them), read from the lines the daemon
wrote: this layer knows those shapes, not the wire classes.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from cleveragents.tool import Message, ToolCallRecord

from ..protocol import ParamsError, structure, wire
from ..protocol import methods as m
from ..statedir import Folder, StateDir
from ._conversation import rebuild
from ._errors import RunInterruptedError, RunNotFoundError, RunStateError
from ._files import (
    SUFFIX,
    Transcript,
    create_locked,
    int_field,
    lines,
    locked,
    os_text,
    valid_run_id,
)
from ._index import META, Entry, RunIndex

logger = logging.getLogger(__name__)

INTERRUPTED_MESSAGE = "the daemon stopped before the run finished"
MAX_CONTINUATIONS = 1000
"""How many runs a rebuilt conversation may chain through ``continueFrom``."""


class TranscriptStore:
    """Where transcripts live; claims new ones, reads old ones back, indexes them."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.state = StateDir(state_dir)
        """The state dir by descriptor, for every open beneath it."""
        self.runs_dir = state_dir / "runs"
        self._index = RunIndex(self.state)
        self._live: set[str] = set()  # claimed by this store and not closed yet
        self._listing: list[dict[str, Any]] | None = None
        self._lock = threading.Lock()  # summaries() runs in worker threads

    # -- claiming ----------------------------------------------------------------------

    def claim(self, run_id: str) -> Transcript:
        """Create and lock the transcript of a new run.

        Raises ``RunStateError`` when the id is taken (its file exists, from this or any
        other process). Any other ``OSError`` gives a ``Transcript`` with ``error`` set
        whose writes are no-ops."""
        path = self.path(run_id)
        try:
            runs = self.state.folder("runs", create=True)
            assert runs is not None
            with runs:
                fd = create_locked(runs, path.name)
        except FileExistsError:
            raise RunStateError(f"run id {run_id!r} is already in use") from None
        except OSError as exc:
            logger.warning("cannot create transcript %s: %s", path, os_text(exc))
            return Transcript(path, None, self.state_dir, exc)
        transcript = Transcript(path, fd, self.state_dir)
        with self._lock:
            self._live.add(run_id)
        transcript.on_close(lambda: self._released(run_id))
        return transcript

    def _released(self, run_id: str) -> None:
        with self._lock:
            self._live.discard(run_id)

    def is_live(self, run_id: str) -> bool:
        """Whether a writer holds the run's lock (this process or another)."""
        if run_id in self._live:
            return True
        return self._locked(run_id)

    def _locked(self, run_id: str) -> bool:
        name = self.path(run_id).name
        with self._runs() as runs:
            return runs is not None and locked(runs, name)

    def _runs(self) -> _Runs:
        """The ``runs`` folder for reading (``None`` inside when missing or refused)."""
        return _Runs(self.state)

    # -- reading -----------------------------------------------------------------------

    def path(self, run_id: str) -> Path:
        if not valid_run_id(run_id):
            raise RunNotFoundError(f"invalid run id {run_id!r}")
        return self.runs_dir / f"{run_id}{SUFFIX}"

    def exists(self, run_id: str) -> bool:
        if not valid_run_id(run_id):
            return False
        name = self.path(run_id).name
        with self._runs() as runs:
            info = runs.lstat(name) if runs is not None else None
        return info is not None and stat.S_ISREG(info.st_mode)

    def live_elsewhere(self, run_id: str) -> bool:
        """Whether another process (another daemon on this state dir) is running it."""
        return valid_run_id(run_id) and self._locked(run_id)

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """The events of a transcript; unreadable lines (a torn last line, bytes that are
        not UTF-8 or not JSON, a line over ``MAX_LINE_BYTES``) are skipped. A name that
        is not a regular file (a link, a FIFO) is no run."""
        name = self.path(run_id).name
        with self._runs() as runs:
            fd = runs.open_read(name) if runs is not None else None
        if fd is None:
            raise RunNotFoundError(f"unknown run {run_id!r}")
        return self._events(fd)

    @staticmethod
    def _events(fd: int) -> Iterator[dict[str, Any]]:
        with os.fdopen(fd, "rb") as handle:
            yield from lines(handle)

    def result(self, run_id: str) -> dict[str, Any]:
        """The run's ``RunResult`` as wire data: its ``run/finished`` result, or for an
        interrupted run a ``failed`` result rebuilt from the lines it has. Raises
        ``RunStateError`` for a run another process is still writing."""
        started_at = ""
        records: list[Any] = []
        iterations = 0
        content = ""
        for event in self.events(run_id):
            method, params = event.get("method"), event["params"]
            if method == m.RUN_FINISHED and _fits(params.get("result"), wire.RunResult):
                return dict(params["result"])
            if method == META:
                started_at = str(params.get("startedAt", ""))
            elif method == m.RUN_TOOL_CALL and _fits(params.get("record"), ToolCallRecord):
                records.append(params["record"])
            elif method == m.RUN_ITERATION:
                iterations = max(iterations, int_field(params.get("iteration")))
                content = str(params.get("content", ""))
        if self.is_live(run_id):
            raise RunStateError(f"run {run_id!r} is active in another process")
        return {
            "runId": run_id,
            "status": "failed",
            "content": content,
            "toolCallHistory": records,
            "iterations": iterations,
            "terminatedByLimit": False,
            "durationMs": self._interrupted_duration(run_id, started_at),
            "error": {"code": RunInterruptedError.code, "message": INTERRUPTED_MESSAGE},
        }

    def conversation(self, run_id: str, until: int | None = None) -> list[Message]:
        """The messages of a finished run, rebuilt from its transcript and those of the
        runs it continued (or forked), oldest first; what ``continueFrom`` continues.
        With ``until``, the run's own iterations after that one are left out (what a
        fork of it at ``until`` starts from; more than it ran: ``RunStateError``).

        Raises ``RunNotFoundError`` for an unknown run (or one it continued),
        ``RunStateError`` for a run still being written, ``RunInterruptedError`` for one
        that never finished."""
        chain: list[list[Message]] = []
        pruned: dict[str, str] = {}
        seen: set[str] = set()
        current: str | None = run_id
        limit = until
        while current is not None:
            if current in seen or len(seen) >= MAX_CONTINUATIONS:
                raise RunStateError(f"run {run_id!r} continues a chain of runs that loops")
            seen.add(current)
            try:
                messages, current, stubs, limit = self._own_messages(current, limit)
            except RunNotFoundError:
                if current == run_id:
                    raise
                raise RunNotFoundError(
                    f"run {run_id!r} continues run {current!r}, whose transcript is gone"
                ) from None
            chain.append(messages)
            pruned.update(stubs)
        conversation = [message for messages in reversed(chain) for message in messages]
        if pruned:  # a later run may have pruned outputs of the runs it continued
            for message in conversation:
                stub = pruned.get(message.tool_call_id or "") if message.role == "tool" else None
                if stub is not None:
                    message.content = stub
        return conversation

    def _own_messages(
        self, run_id: str, until: int | None = None
    ) -> tuple[list[Message], str | None, dict[str, str], int | None]:
        """One run's own messages (up to its iteration ``until``), the run it continued or
        forked, and how much of that one it took (``None``: all)."""
        rebuilt = rebuild(self.events(run_id), until)
        if not rebuilt.finished:
            if self.is_live(run_id):
                raise RunStateError(f"run {run_id!r} has not finished")
            raise RunInterruptedError(f"run {run_id!r} cannot be continued: {INTERRUPTED_MESSAGE}")
        if until is not None and until > rebuilt.iterations:
            raise RunStateError(f"run {run_id!r} has {rebuilt.iterations} iterations, not {until}")
        return rebuilt.messages, rebuilt.parent, rebuilt.pruned, rebuilt.parent_until

    def _interrupted_duration(self, run_id: str, started_at: str) -> float:
        """From ``$/meta.startedAt`` to the file's last write: the time of its last event."""
        with self._runs() as runs:
            info = runs.lstat(self.path(run_id).name) if runs is not None else None
        try:
            start = datetime.fromisoformat(started_at).timestamp()
        except ValueError:
            return 0.0
        if info is None:
            return 0.0
        end = info.st_mtime
        return round(max(0.0, end - start) * 1000.0, 3)

    # -- the index ---------------------------------------------------------------------

    def summaries(self) -> list[dict[str, Any]]:
        """A ``RunSummary`` (wire data) per transcript on disk, newest first, from the
        index. Blocking I/O: the daemon calls it in a worker thread."""
        with self._lock:
            entries = self._index.refresh()
            live_here = set(self._live)
            cached = self._listing
            if (
                cached is not None
                and not self._index.changed
                and not live_here
                and not any(e.status is None for e in entries.values())
            ):
                return list(cached)  # nothing changed since the last call
        out = [self._summary(run_id, entry, live_here) for run_id, entry in entries.items()]
        out.sort(key=lambda s: str(s["startedAt"]), reverse=True)
        with self._lock:
            self._listing = out
        return list(out)

    def _summary(self, run_id: str, entry: Entry, live_here: set[str]) -> dict[str, Any]:
        status, active = entry.status, False
        if status is None:
            active = run_id in live_here or self._locked(run_id)
            status = "running" if active else "failed"
        return {
            "runId": run_id, "status": status, "prompt": entry.prompt,
            "startedAt": entry.started_at, "iterations": entry.iterations,
            "toolCallCount": entry.tools, "active": active,
        }  # fmt: skip


def _fits(data: Any, cls: type) -> bool:
    """Whether a line's value has its wire shape: one that does not (a planted or
    type-confused transcript) is read as a torn line, skipped, never a traceback."""
    try:
        structure(data, cls, root="line")
    except ParamsError:
        logger.warning("skipped a transcript line whose %s does not fit its type", cls.__name__)
        return False
    return True


class _Runs:
    """``with store._runs() as runs``: the ``runs`` folder, or ``None`` when it does not
    exist or is refused (a link planted in its place)."""

    def __init__(self, state: StateDir) -> None:
        self._state = state
        self._folder: Folder | None = None

    def __enter__(self) -> Folder | None:
        try:
            self._folder = self._state.folder("runs")
        except OSError:
            self._folder = None
        return self._folder

    def __exit__(self, *exc: object) -> None:
        if self._folder is not None:
            self._folder.close()
