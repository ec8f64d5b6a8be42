"""The run index behind ``run/list`` and ``cleveragents runs list``: a cache of what
each transcript says, never trusted over the transcript.

One entry per transcript file, keyed by the file's (inode, size, mtime, ctime): a
refresh is one directory scan and one ``stat`` per unfinished file, re-reading only the
files that are new or changed (a finished transcript never changes again; its inode,
which the scan gives for free, is still compared). The entries are persisted to
``STATE_DIR/run-index.json`` (replaced atomically), so a new process (a restarted daemon,
``cleveragents runs list``) starts warm; two daemons may both write it (last writer
wins).

The index is the daemon's own writing, signed with the state dir's secret
(:mod:`cleveragents.statedir`): a ``run-index.json`` planted in the state dir, or one
signed elsewhere, is dropped and the index rebuilt from the transcripts. Each entry
loaded from disk is compared with a full ``stat`` of its file at the first refresh of
the process, so a transcript written since the index was saved is read again. What a
transcript says always wins: a stale or foreign index costs re-reads, never wrong
answers.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from typing import Any

from ..protocol import methods as m
from ..statedir import Folder, StateDir, sign, signed, warn_once
from ._files import SUFFIX, int_field, lines, valid_run_id

logger = logging.getLogger(__name__)

META = "$/meta"
"""The first line of a transcript: what the notifications do not carry (prompt, time)."""
PROMPT_SUMMARY_MAX = 200
"""Prompts in ``RunSummary`` are cut to this many characters."""
INDEX_NAME = "run-index.json"
MAX_INDEX_BYTES = 64 * 1024 * 1024
"""The largest ``run-index.json`` read (about 200 bytes a run): a larger one is rebuilt."""
_INDEX_VERSION = 2
_PURPOSE = "run-index"
_PERSIST_EVERY = 64
"""Persist the index after this many changed entries (and after the first build), so
warm listings rarely pay for writing it and a cold start re-reads at most this many."""

Key = tuple[int, int, int, int]


class Entry:
    """What the index keeps per transcript file."""

    __slots__ = ("checked", "iterations", "key", "prompt", "started_at", "status", "tools")

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
        self.checked = True
        """Whether this process compared it with its file (not yet, when loaded)."""

    def dump(self) -> list[Any]:
        return [list(self.key), self.status, self.prompt, self.started_at, self.iterations,
                self.tools]  # fmt: skip

    @classmethod
    def load(cls, row: Any) -> Entry | None:
        try:
            key, status, prompt, started_at, iterations, tools = row
            ino, size, mtime, ctime = key
            if not (isinstance(status, str) or status is None):
                return None
            entry = cls((int(ino), int(size), int(mtime), int(ctime)), status, str(prompt),
                        str(started_at), int(iterations), int(tools))  # fmt: skip
        except (TypeError, ValueError):
            return None
        entry.checked = False
        return entry


def _key(info: os.stat_result) -> Key:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def read_entry(runs: Folder, name: str) -> Entry | None:
    """One transcript's entry: its ``$/meta``, and its counts from ``run/finished`` (or
    from its lines, for a run that has not finished). ``None`` when the name is no
    longer a regular file (swapped since the scan: skipped, never waited on)."""
    fd = runs.open_read(name)
    if fd is None:
        return None
    meta: dict[str, Any] = {}
    iterations = tools = 0
    status: str | None = None
    with os.fdopen(fd, "rb") as handle:
        key = _key(os.fstat(handle.fileno()))
        try:
            for event in lines(handle):
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

    def __init__(self, state: StateDir) -> None:
        self.state = state
        self._entries: dict[str, Entry] | None = None
        self.changed = True
        """Whether the last refresh found anything new (or was the first)."""
        self._dirty = 0

    def refresh(self) -> dict[str, Entry]:
        """Bring the entries up to date with the directory: one scan, one ``stat`` per
        unfinished file (and per entry loaded from disk, once), re-reading only files
        that are new or changed. Anything but a regular file is skipped."""
        old = self._entries if self._entries is not None else self._load()
        first = self._entries is None
        fresh: dict[str, Entry] = {}
        changed = 0
        try:
            runs = self.state.folder("runs")
        except OSError:
            runs = None  # a link or a file where the folder should be: no runs
        if runs is not None:
            with runs:
                for item in runs.entries():
                    name = item.name
                    if not name.endswith(SUFFIX):
                        continue
                    run_id = name[: -len(SUFFIX)]
                    entry, inode = old.get(run_id), item.inode()
                    if entry is None:
                        if not valid_run_id(run_id):
                            continue
                    elif entry.checked and entry.status is not None and entry.key[0] == inode:
                        fresh[run_id] = entry  # a finished transcript never changes again
                        continue
                    try:
                        info = item.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if not stat.S_ISREG(info.st_mode):
                        warn_once(runs.path / name, "not a regular file")
                        continue
                    if entry is None or entry.key != _key(info):
                        entry = read_entry(runs, name)
                        if entry is None:
                            continue
                        changed += 1
                    entry.checked = True
                    fresh[run_id] = entry
        changed += len(old.keys() - fresh.keys())
        self.changed = bool(changed) or first
        self._entries = fresh
        self._dirty += changed
        if (first and changed) or self._dirty >= _PERSIST_EVERY:
            self._save(fresh)
        return fresh

    def _load(self) -> dict[str, Entry]:
        """The entries of ``run-index.json`` if this state dir signed it; else none."""
        try:
            top = self.state.folder()
        except OSError:
            return {}
        if top is None:
            return {}
        with top:
            try:
                data = top.read_bytes(INDEX_NAME, MAX_INDEX_BYTES)
            except OSError:
                return {}
            path = top.path / INDEX_NAME
        if data is None:
            return {}
        header, _, body = data.partition(b"\n")
        try:
            head = json.loads(header)
        except (ValueError, RecursionError):
            return {}
        if not isinstance(head, dict) or head.get("version") != _INDEX_VERSION:
            return {}  # an older daemon's: rebuilt
        key = self.state.key(_PURPOSE)
        if key is None or not signed(key, body, head.get("mac")):
            warn_once(path, "not signed with this state dir's secret; rebuilt from the transcripts")
            return {}
        try:
            rows = json.loads(body)
        except (ValueError, RecursionError):
            return {}
        if not isinstance(rows, dict):
            return {}
        out = {}
        for run_id, row in rows.items():
            entry = Entry.load(row)
            if entry is not None and isinstance(run_id, str) and valid_run_id(run_id):
                out[run_id] = entry
        return out

    def _save(self, entries: dict[str, Entry]) -> None:
        """Atomically replace the index file, signed; failing to write it (no secret, a
        read-only state dir) only costs re-reads."""
        key = self.state.key(_PURPOSE)
        if key is None:
            return
        body = json.dumps({k: e.dump() for k, e in entries.items()}, separators=(",", ":"))
        data = body.encode("utf-8")
        head = json.dumps({"version": _INDEX_VERSION, "mac": sign(key, data)})
        try:
            top = self.state.folder()
            if top is None:
                return
            with top:
                top.replace(INDEX_NAME, head.encode("utf-8") + b"\n" + data)
            self._dirty = 0
        except OSError as exc:
            logger.debug("cannot write the run index in %s: %s", self.state.path, exc)
