"""The run index behind ``run/list`` and ``cleveragents runs list``.

One entry per transcript file, keyed by the file's (inode, size, mtime): a refresh is one
directory scan and one ``stat`` per unfinished file, re-reading only the files that are
new or changed (a finished transcript never changes again). The entries are persisted
to ``STATE_DIR/run-index.json`` (written atomically), so a new process (a restarted
daemon, ``cleveragents runs list``) starts warm. Entries are always checked against the
files, so a stale or foreign index costs re-reads, never wrong answers; two daemons may
both write it (last writer wins).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from ..protocol import methods as m
from ._files import SUFFIX, int_field, parse_line, valid_run_id

logger = logging.getLogger(__name__)

META = "$/meta"
"""The first line of a transcript: what the notifications do not carry (prompt, time)."""
PROMPT_SUMMARY_MAX = 200
"""Prompts in ``RunSummary`` are cut to this many characters."""
INDEX_NAME = "run-index.json"
_INDEX_VERSION = 1
_PERSIST_EVERY = 64
"""Persist the index after this many changed entries (and after the first build), so
warm listings rarely pay for writing it and a cold start re-reads at most this many."""

Key = tuple[int, int, int]


class Entry:
    """What the index keeps per transcript file."""

    __slots__ = ("iterations", "key", "prompt", "started_at", "status", "tools")

    def __init__(
        self, key: Key, status: str | None, prompt: str, started_at: str, iterations: int,
        tools: int,
    ) -> None:  # fmt: skip
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
    def load(cls, row: Any) -> Entry | None:
        try:
            key, status, prompt, started_at, iterations, tools = row
            ino, size, mtime = key
            if not (isinstance(status, str) or status is None):
                return None
            return cls((int(ino), int(size), int(mtime)), status, str(prompt), str(started_at),
                       int(iterations), int(tools))  # fmt: skip
        except (TypeError, ValueError):
            return None


def read_entry(path: Path, key: Key) -> Entry:
    """One transcript's entry: its ``$/meta``, and its counts from ``run/finished`` (or
    from its lines, for a run that has not finished)."""
    meta: dict[str, Any] = {}
    iterations = tools = 0
    status: str | None = None
    try:
        with path.open("rb") as handle:
            for raw in handle:
                event = parse_line(raw)
                if event is None:
                    continue
                method, params = event.get("method"), event["params"]
                if method == META and not meta:
                    meta = params
                elif method == m.RUN_TOOL_CALL:
                    tools += 1
                elif method == m.RUN_ITERATION:
                    iterations = max(iterations, int_field(params.get("iteration")))
                elif method == m.RUN_FINISHED and isinstance(params.get("result"), dict):
                    result = params["result"]
                    status = str(result.get("status", "failed"))
                    iterations = int_field(result.get("iterations"))
                    history = result.get("toolCallHistory")
                    tools = len(history) if isinstance(history, list) else 0
                    break
    except OSError:
        pass
    # A run that has not finished is "running" or "failed" depending on its lock,
    # checked at listing time (a lock is not a file change).
    prompt = str(meta.get("prompt", ""))[:PROMPT_SUMMARY_MAX]
    return Entry(key, status, prompt, str(meta.get("startedAt", "")), iterations, tools)


class RunIndex:
    """The entries of one state dir's transcripts, in memory and in ``run-index.json``.
    Not thread-safe: the store calls it under its lock."""

    def __init__(self, runs_dir: Path, index_path: Path) -> None:
        self.runs_dir = runs_dir
        self.path = index_path
        self._entries: dict[str, Entry] | None = None
        self.changed = True
        """Whether the last refresh found anything new (or was the first)."""
        self._dirty = 0

    def refresh(self) -> dict[str, Entry]:
        """Bring the entries up to date with the directory: one scan, one ``stat`` per
        unfinished file, re-reading only files that are new or changed."""
        old = self._entries if self._entries is not None else self._load()
        first = self._entries is None
        fresh: dict[str, Entry] = {}
        changed = 0
        try:
            scan = os.scandir(self.runs_dir)
        except OSError:
            scan = None
        if scan is not None:
            with scan:
                for item in scan:
                    name = item.name
                    if not name.endswith(SUFFIX):
                        continue
                    run_id = name[: -len(SUFFIX)]
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
                        entry = read_entry(Path(item.path), key)
                        changed += 1
                    fresh[run_id] = entry
        changed += len(old.keys() - fresh.keys())
        self.changed = bool(changed) or first
        self._entries = fresh
        self._dirty += changed
        if (first and changed) or self._dirty >= _PERSIST_EVERY:
            self._save(fresh)
        return fresh

    def _load(self) -> dict[str, Entry]:
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _INDEX_VERSION:
            return {}
        rows = data.get("runs")
        if not isinstance(rows, dict):
            return {}
        out = {}
        for run_id, row in rows.items():
            entry = Entry.load(row)
            if entry is not None and isinstance(run_id, str) and valid_run_id(run_id):
                out[run_id] = entry
        return out

    def _save(self, entries: dict[str, Entry]) -> None:
        """Atomically replace the index file; failing to write it only costs re-reads."""
        data = {"version": _INDEX_VERSION, "runs": {k: e.dump() for k, e in entries.items()}}
        temp = self.path.with_name(f".{INDEX_NAME}.{uuid.uuid4().hex}.tmp")
        try:
            temp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
            os.replace(temp, self.path)
            self._dirty = 0
        except (OSError, ValueError) as exc:
            logger.debug("cannot write the run index %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                temp.unlink()
