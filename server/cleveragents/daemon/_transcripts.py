"""Run transcripts: ``STATE_DIR/runs/RUN_ID.jsonl``, one line per event, written as it happens.

This module owns the files under the state dir: claiming a run id, writing its lines,
reading them back, and the run index behind ``run/list``. It knows nothing of the wire
beyond the shapes of the lines it reads back (``RunResult`` and ``RunSummary`` dicts).

Writing
    Each line is ``{"method": ..., "params": ...}`` with the same payload the
    notification carried. A line goes to the file in ``write`` calls on an ``O_APPEND``
    descriptor (no user-space buffer), so a crash loses at most the line being written.

Claiming
    ``TranscriptStore.claim`` creates the file exclusively and holds an exclusive
    ``flock`` on it until ``Transcript.close()``. The file is created and locked under
    a temporary name, then hard-linked into place (``link`` fails if the name exists,
    like ``O_EXCL``), so no reader ever sees the file unlocked while its run is live.
    Where hard links are not supported it falls back to ``O_CREAT | O_EXCL`` on the
    final name. A second store (another daemon on the same state dir) sees the lock:
    ``result`` raises ``RunStateError`` ("active in another process") and ``summaries``
    lists the run as ``running``.

Write failures
    A full disk, a read-only or uncreatable state dir never raise from ``claim`` (only a
    taken id does): the transcript records the ``OSError`` in ``error``, its writes
    become no-ops, and ``failure_message()`` names the state dir and the OS error.

Reading
    Files are read in binary and decoded line by line; a line that is not UTF-8, not
    JSON, or too deeply nested is skipped. A run with no ``run/finished`` line and no
    live writer was interrupted: it reads ``failed`` with ``RunInterruptedError``'s
    code and a ``durationMs`` from ``$/meta.startedAt`` to the file's mtime (the time
    of its last write, hence of its last event).

Rebuilding a conversation
    ``conversation`` turns a finished run's lines back into the messages its loop held
    (``continueFrom`` of a run no longer in memory): the prompt from ``$/meta``, then per
    iteration that ended (a ``run/iteration`` line) the assistant message with its tool
    calls (``run/toolCallStarted``) and one tool message per call (its ``run/toolCall``
    record, as the runtime words it). A run that continued another is rebuilt after the
    one it continued. The system prompt is not in transcripts; the next run brings its own.

The index
    ``summaries()`` answers from an in-memory cache keyed by each file's (inode, size,
    mtime), refreshed by one directory scan and re-reading only the files that changed.
    The cache is persisted to ``STATE_DIR/run-index.json`` (written atomically), so a
    new process (a restarted daemon, ``cleveragents runs list``) starts warm. Entries
    are always checked against the files, so a stale or foreign index costs re-reads,
    never wrong answers; two daemons may both write it (last writer wins).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ..tool import Message, ToolCall
from ..tool._runner import output_text
from ._errors import RunInterruptedError, RunNotFoundError, RunStateError

logger = logging.getLogger(__name__)

RUN_ID_PATTERN = re.compile(r"\A[A-Za-z0-9._-]{1,128}\Z")
"""Anchored on the whole string (``\\Z``: no trailing newline); prefer ``valid_run_id``,
which also refuses ``.`` and ``..``."""
META = "$/meta"
"""The first line of a transcript: what the notifications do not carry (prompt, time)."""
PROMPT_SUMMARY_MAX = 200
"""Prompts in ``RunSummary`` are cut to this many characters."""
INTERRUPTED_MESSAGE = "the daemon stopped before the run finished"
INDEX_NAME = "run-index.json"
_INDEX_VERSION = 1
_PERSIST_EVERY = 64
"""Persist the index after this many changed entries (and after the first build), so
warm listings rarely pay for writing it and a cold start re-reads at most this many."""
_SUFFIX = ".jsonl"
MAX_CONTINUATIONS = 1000
"""How many runs a rebuilt conversation may chain through ``continueFrom``."""


def valid_run_id(run_id: str) -> bool:
    """Whether ``run_id`` may name a run: 1-128 of ``A-Za-z0-9._-``, not ``.`` or ``..``."""
    return RUN_ID_PATTERN.fullmatch(run_id) is not None and run_id not in (".", "..")


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "cleveragents"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decode = json.JSONDecoder(parse_constant=_no_constants).decode


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    """One transcript line as an event, or None for anything unreadable."""
    try:
        event = _decode(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        return None
    if isinstance(event, dict) and isinstance(event.get("params"), dict):
        return event
    return None


def _os_text(exc: OSError) -> str:
    if exc.errno is not None and exc.strerror:
        return f"[Errno {exc.errno}] {exc.strerror}"
    return str(exc)


class Transcript:
    """The open transcript of one active run; holds the run id's lock until ``close()``."""

    __slots__ = ("_fd", "_on_close", "error", "path", "state_dir")

    def __init__(
        self, path: Path, fd: int | None, state_dir: Path, error: OSError | None = None
    ) -> None:
        self.path = path
        self.state_dir = state_dir
        self._fd = fd
        self.error: OSError | None = error
        self._on_close: list[Any] = []

    def append(self, method: str, params: Any) -> None:
        self.append_raw(method, json.dumps(params, ensure_ascii=False, separators=(",", ":")))

    def append_raw(self, method: str, params_text: str) -> None:
        """Append a line whose params are already JSON text (serialised once per event).
        After a failed write nothing more is written: the file keeps its lock, so the run
        still reads as live elsewhere, and ``error`` says what went wrong."""
        if self._fd is None or self.error is not None:
            return
        line = f'{{"method":{json.dumps(method)},"params":{params_text}}}\n'
        # A lone surrogate cannot be UTF-8; as a \\uXXXX escape it is still the same JSON.
        data = memoryview(line.encode("utf-8", "backslashreplace"))
        try:
            while data:
                written = os.write(self._fd, data)
                data = data[written:]
        except OSError as exc:
            self.error = exc
            logger.warning("cannot write transcript %s: %s", self.path, _os_text(exc))

    def failure_message(self) -> str | None:
        """Why the transcript cannot be written, naming the state dir; None when it can."""
        if self.error is None:
            return None
        return f"cannot write transcript in {self.state_dir}: {_os_text(self.error)}"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()


class _Entry:
    """What the index keeps per transcript file."""

    __slots__ = ("iterations", "key", "prompt", "started_at", "status", "tools")

    def __init__(
        self,
        key: tuple[int, int, int],
        status: str | None,
        prompt: str,
        started_at: str,
        iterations: int,
        tools: int,
    ) -> None:
        self.key = key
        self.status = status  # None: no run/finished line (live or interrupted)
        self.prompt = prompt
        self.started_at = started_at
        self.iterations = iterations
        self.tools = tools

    def dump(self) -> list[Any]:
        return [list(self.key), self.status, self.prompt, self.started_at, self.iterations,
                self.tools]  # fmt: skip

    @classmethod
    def load(cls, row: Any) -> _Entry | None:
        try:
            key, status, prompt, started_at, iterations, tools = row
            ino, size, mtime = key
            if not (isinstance(status, str) or status is None):
                return None
            return cls((int(ino), int(size), int(mtime)), status, str(prompt), str(started_at),
                       int(iterations), int(tools))  # fmt: skip
        except (TypeError, ValueError):
            return None


class TranscriptStore:
    """Where transcripts live; claims new ones, reads old ones back, indexes them."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.runs_dir = state_dir / "runs"
        self.index_path = state_dir / INDEX_NAME
        self._live: set[str] = set()  # claimed by this store and not closed yet
        self._index: dict[str, _Entry] | None = None
        self._listing: list[dict[str, Any]] | None = None
        self._changed = True
        self._dirty = 0
        self._lock = threading.Lock()  # summaries() runs in worker threads

    # -- claiming ----------------------------------------------------------------------

    def claim(self, run_id: str) -> Transcript:
        """Create and lock the transcript of a new run.

        Raises ``RunStateError`` when the id is taken (its file exists, from this or any
        other process). Any other ``OSError`` gives a ``Transcript`` with ``error`` set
        whose writes are no-ops."""
        path = self.path(run_id)
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            fd = self._create_locked(path)
        except FileExistsError:
            raise RunStateError(f"run id {run_id!r} is already in use") from None
        except OSError as exc:
            logger.warning("cannot create transcript %s: %s", path, _os_text(exc))
            return Transcript(path, None, self.state_dir, exc)
        transcript = Transcript(path, fd, self.state_dir)
        with self._lock:
            self._live.add(run_id)
        transcript._on_close.append(lambda: self._released(run_id))
        return transcript

    open = claim  # the name callers used before claims were exclusive

    def _released(self, run_id: str) -> None:
        with self._lock:
            self._live.discard(run_id)

    def _create_locked(self, path: Path) -> int:
        temp = path.with_name(f".claim-{uuid.uuid4().hex}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh inode: never contended
            try:
                os.link(temp, path)  # atomic and exclusive: EEXIST if the id is taken
            except FileExistsError:
                raise
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    raise
                os.close(fd)  # no hard links here: exclusive create, then lock
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX)
            return fd
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)

    def is_live(self, run_id: str) -> bool:
        """Whether a writer holds the run's lock (this process or another)."""
        if run_id in self._live:
            return True
        return _locked(self.path(run_id))

    # -- reading -----------------------------------------------------------------------

    def path(self, run_id: str) -> Path:
        if not valid_run_id(run_id):
            raise RunNotFoundError(f"invalid run id {run_id!r}")
        return self.runs_dir / f"{run_id}{_SUFFIX}"

    def exists(self, run_id: str) -> bool:
        return valid_run_id(run_id) and self.path(run_id).exists()

    def live_elsewhere(self, run_id: str) -> bool:
        """Whether another process (another daemon on this state dir) is running it."""
        return valid_run_id(run_id) and _locked(self.path(run_id))

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """The events of a transcript; unreadable lines (a torn last line, bytes that are
        not UTF-8 or not JSON) are skipped."""
        path = self.path(run_id)
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            raise RunNotFoundError(f"unknown run {run_id!r}") from None
        with handle:
            for raw in handle:
                event = _parse_line(raw)
                if event is not None:
                    yield event

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
            if method == "run/finished" and isinstance(params.get("result"), dict):
                return dict(params["result"])
            if method == META:
                started_at = str(params.get("startedAt", ""))
            elif method == "run/toolCall":
                records.append(params.get("record"))
            elif method == "run/iteration":
                iterations = max(iterations, _int(params.get("iteration")))
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

    def conversation(self, run_id: str) -> list[Message]:
        """The messages of a finished run, rebuilt from its transcript and those of the
        runs it continued, oldest first; what ``continueFrom`` continues.

        Raises ``RunNotFoundError`` for an unknown run (or one it continued),
        ``RunStateError`` for a run still being written, ``RunInterruptedError`` for one
        that never finished."""
        chain: list[list[Message]] = []
        seen: set[str] = set()
        current: str | None = run_id
        while current is not None:
            if current in seen or len(seen) >= MAX_CONTINUATIONS:
                raise RunStateError(f"run {run_id!r} continues a chain of runs that loops")
            seen.add(current)
            try:
                messages, current = self._own_messages(current)
            except RunNotFoundError:
                if current == run_id:
                    raise
                raise RunNotFoundError(
                    f"run {run_id!r} continues run {current!r}, whose transcript is gone"
                ) from None
            chain.append(messages)
        return [message for messages in reversed(chain) for message in messages]

    def _own_messages(self, run_id: str) -> tuple[list[Message], str | None]:
        """One run's own messages and the run it continued (``$/meta.continueFrom``)."""
        meta: dict[str, Any] = {}
        calls: dict[int, list[ToolCall]] = {}
        records: dict[int, list[dict[str, Any]]] = {}
        ended: list[tuple[int, str]] = []  # (iteration, content) of each run/iteration
        finished = False
        for event in self.events(run_id):
            method, params = event.get("method"), event["params"]
            if method == META and not meta:
                meta = params
            elif method == "run/toolCallStarted":
                arguments = params.get("inputs")
                calls.setdefault(_int(params.get("iteration")), []).append(
                    ToolCall(
                        str(params.get("callId", "")), str(params.get("toolName", "")),
                        arguments if isinstance(arguments, dict) else {},
                    )
                )  # fmt: skip
            elif method == "run/toolCall" and isinstance(params.get("record"), dict):
                record = params["record"]
                records.setdefault(_int(record.get("iteration")), []).append(record)
            elif method == "run/iteration":
                ended.append((_int(params.get("iteration")), str(params.get("content", ""))))
            elif method == "run/finished":
                finished = True
        if not finished:
            if self.is_live(run_id):
                raise RunStateError(f"run {run_id!r} has not finished")
            raise RunInterruptedError(f"run {run_id!r} cannot be continued: {INTERRUPTED_MESSAGE}")
        messages = [Message("user", str(meta.get("prompt", "")))]
        for iteration, content in ended:
            own_calls = calls.get(iteration, [])
            messages.append(Message("assistant", content, own_calls))
            messages.extend(_tool_messages(own_calls, records.get(iteration, [])))
        parent = meta.get("continueFrom")
        return messages, parent if isinstance(parent, str) and parent else None

    def _interrupted_duration(self, run_id: str, started_at: str) -> float:
        """From ``$/meta.startedAt`` to the file's last write: the time of its last event."""
        try:
            start = datetime.fromisoformat(started_at).timestamp()
            end = self.path(run_id).stat().st_mtime
        except (ValueError, OSError):
            return 0.0
        return round(max(0.0, end - start) * 1000.0, 3)

    # -- the index ---------------------------------------------------------------------

    def summaries(self) -> list[dict[str, Any]]:
        """A ``RunSummary`` (wire data) per transcript on disk, newest first, from the
        index. Blocking I/O: the daemon calls it in a worker thread."""
        with self._lock:
            entries = self._refresh()
            live_here = set(self._live)
            cached = self._listing
            if (
                cached is not None
                and not self._changed
                and not live_here
                and not any(e.status is None for e in entries.values())
            ):
                return list(cached)  # nothing changed since the last call
        out: list[dict[str, Any]] = []
        for run_id, entry in entries.items():
            status, active = entry.status, False
            if status is None:
                active = run_id in live_here or _locked(self.runs_dir / f"{run_id}{_SUFFIX}")
                status = "running" if active else "failed"
            out.append({
                "runId": run_id, "status": status, "prompt": entry.prompt,
                "startedAt": entry.started_at, "iterations": entry.iterations,
                "toolCallCount": entry.tools, "active": active,
            })  # fmt: skip
        out.sort(key=lambda s: str(s["startedAt"]), reverse=True)
        with self._lock:
            self._listing = out
        return list(out)

    def _refresh(self) -> dict[str, _Entry]:
        """Bring the index up to date with the directory: one scan, one ``stat`` per file,
        re-reading only files that are new or changed."""
        old = self._index if self._index is not None else self._load_index()
        first = self._index is None
        fresh: dict[str, _Entry] = {}
        changed = 0
        try:
            scan = os.scandir(self.runs_dir)
        except OSError:
            scan = None
        if scan is not None:
            with scan:
                for item in scan:
                    name = item.name
                    if not name.endswith(_SUFFIX):
                        continue
                    run_id = name[: -len(_SUFFIX)]
                    entry = old.get(run_id)
                    if entry is not None and entry.status is not None:
                        fresh[run_id] = entry  # a finished transcript never changes again
                        continue
                    if not valid_run_id(run_id):
                        continue
                    try:
                        st = item.stat()
                    except OSError:
                        continue
                    key = (st.st_ino, st.st_size, st.st_mtime_ns)
                    if entry is None or entry.key != key:
                        entry = self._read_entry(Path(item.path), key)
                        changed += 1
                    fresh[run_id] = entry
        changed += len(old.keys() - fresh.keys())
        self._changed = bool(changed) or first
        self._index = fresh
        self._dirty += changed
        if (first and changed) or self._dirty >= _PERSIST_EVERY:
            self._save_index(fresh)
        return fresh

    def _read_entry(self, path: Path, key: tuple[int, int, int]) -> _Entry:
        meta: dict[str, Any] = {}
        iterations = tools = 0
        status: str | None = None
        try:
            with path.open("rb") as handle:
                for raw in handle:
                    event = _parse_line(raw)
                    if event is None:
                        continue
                    method, params = event.get("method"), event["params"]
                    if method == META and not meta:
                        meta = params
                    elif method == "run/toolCall":
                        tools += 1
                    elif method == "run/iteration":
                        iterations = max(iterations, _int(params.get("iteration")))
                    elif method == "run/finished" and isinstance(params.get("result"), dict):
                        result = params["result"]
                        status = str(result.get("status", "failed"))
                        iterations = _int(result.get("iterations"))
                        history = result.get("toolCallHistory")
                        tools = len(history) if isinstance(history, list) else 0
                        break
        except OSError:
            pass
        # A run that has not finished is "running" or "failed" depending on its lock,
        # checked at listing time (a lock is not a file change).
        prompt = str(meta.get("prompt", ""))[:PROMPT_SUMMARY_MAX]
        return _Entry(key, status, prompt, str(meta.get("startedAt", "")), iterations, tools)

    def _load_index(self) -> dict[str, _Entry]:
        try:
            data = json.loads(self.index_path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _INDEX_VERSION:
            return {}
        rows = data.get("runs")
        if not isinstance(rows, dict):
            return {}
        out = {}
        for run_id, row in rows.items():
            entry = _Entry.load(row)
            if entry is not None and isinstance(run_id, str) and valid_run_id(run_id):
                out[run_id] = entry
        return out

    def _save_index(self, entries: dict[str, _Entry]) -> None:
        """Atomically replace the index file; failing to write it only costs re-reads."""
        data = {"version": _INDEX_VERSION, "runs": {k: e.dump() for k, e in entries.items()}}
        temp = self.index_path.with_name(f".{INDEX_NAME}.{uuid.uuid4().hex}.tmp")
        try:
            temp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
            os.replace(temp, self.index_path)
            self._dirty = 0
        except (OSError, ValueError) as exc:
            logger.debug("cannot write the run index %s: %s", self.index_path, exc)
            with contextlib.suppress(OSError):
                temp.unlink()


def _tool_messages(calls: list[ToolCall], records: list[dict[str, Any]]) -> list[Message]:
    """One tool message per call, in the model's order, worded as the runtime words them
    (``take_records``): the output as text, or the error of a failed record."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for each in records:
        by_id.setdefault(str(each.get("callId", "")), []).append(each)
    out = []
    for call in calls:
        pending = by_id.get(call.id)
        record = pending.pop(0) if pending else None
        if record is None:
            text = "the tool call has no record in the transcript"
            out.append(Message("tool", text, [], call.id, call.name, True))
        elif record.get("success") is True:
            text = output_text(record.get("output"))
            out.append(Message("tool", text, [], call.id, call.name))
        else:
            text = str(record.get("error") or "the tool failed")
            out.append(Message("tool", text, [], call.id, call.name, True))
    return out


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _locked(path: Path) -> bool:
    """Whether some writer holds the file's exclusive lock (any process, this one too)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # also drops our shared lock when we got it
    return False
