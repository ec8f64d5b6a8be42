"""ACP sessions on disk, under ``STATE_DIR/acp/``: what survives a daemon restart.

* ``SESSION_ID.json``: the session's settings (cwd, extra directories, mode, model, MCP
  entries as the client sent them, title, update time) and its run ids in order. The
  runs themselves are the daemon's transcripts (``STATE_DIR/runs``), from which the next
  turn's conversation is rebuilt.
* ``SESSION_ID.jsonl``: the ``session/update`` payloads a ``session/load`` replays (each
  prompt, each text chunk, each tool call and its final update), one flushed line each.

Both are opened beneath the state dir's pinned descriptor without following a link
(:mod:`cleveragents.statedir`), new files exclusively and 0600 in a 0700 folder, and
read only when they are regular files (a FIFO or a device planted there is skipped,
never waited on), a settings file up to :data:`MAX_META_BYTES` and a log line up to
:data:`MAX_LOG_LINE`. At most :data:`MAX_OPEN_LOGS` logs stay open; the least recently
written is closed first, and opened again when written.

The settings carry an HMAC (``mac``) keyed by the state dir's secret: they are the
daemon's own record of what the client itself sent. A settings file without a valid
one (planted in the state dir, copied from elsewhere, or of the wrong shape) is
:class:`Unreadable`: never loaded, its MCP commands never started. A log line of the
wrong shape is skipped.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
from pathlib import Path
from typing import IO, Any

import attrs

from ..protocol import dumps
from ..statedir import StateDir, read_lines, sign, signed
from ..transcripts import valid_run_id

logger = logging.getLogger(__name__)

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_UPDATE_KIND = re.compile(r"[a-z_]{1,64}")
MAX_OPEN_LOGS = 32
"""Session logs kept open at once: an editor that opens a thousand chat threads and never
sends ``session/close`` holds no more descriptors than this."""
MAX_META_BYTES = 1024 * 1024
"""The largest session settings file read back."""
MAX_LOG_LINE = 32 * 1024 * 1024
"""The longest log line replayed (an ACP line is at most 32 MiB on the wire too)."""
_PURPOSE = "acp-session"


@attrs.frozen
class Unreadable:
    """A session file that is never loaded, and why (for ``session/list``)."""

    session_id: str
    reason: str
    cwd: str | None = None
    """The cwd the file claims, when it has one (unverified: for the listing's filter)."""


def valid_session_id(session_id: object) -> bool:
    return isinstance(session_id, str) and _ID.fullmatch(session_id) is not None  # no "\n" after


def _canonical(meta: dict[str, Any]) -> bytes:
    """What the MAC covers: the settings as sorted, ASCII-only JSON."""
    return json.dumps(meta, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _shape_problem(meta: dict[str, Any], session_id: str) -> str | None:
    """What is wrong with signed settings' shape (an older daemon's), if anything."""
    strings = ("cwd", "mode")
    optional = ("model", "title", "updatedAt")
    if meta.get("sessionId") != session_id:
        return "its sessionId is not its file's name"
    bad = [k for k in strings if not isinstance(meta.get(k), str)]
    bad += [k for k in optional if not isinstance(meta.get(k), str | None)]
    extra = meta.get("additionalDirectories", [])
    if not (isinstance(extra, list) and all(isinstance(d, str) for d in extra)):
        bad.append("additionalDirectories")
    if not isinstance(meta.get("mcpServers", []), list):
        bad.append("mcpServers")
    runs = meta.get("runs")
    if not (isinstance(runs, list) and all(isinstance(r, str) and valid_run_id(r) for r in runs)):
        bad.append("runs")
    failed = meta.get("failed", [])
    if not (isinstance(failed, list) and all(isinstance(runs, list) and r in runs for r in failed)):
        bad.append("failed")
    if not bad:
        return None
    return f"its {', '.join(bad)} {'has' if len(bad) == 1 else 'have'} the wrong shape"


class SessionStore:
    def __init__(self, state_dir: Path) -> None:
        self.state = StateDir(state_dir)
        self.dir = state_dir / "acp"
        self._logs: collections.OrderedDict[str, IO[str]] = collections.OrderedDict()

    def save(self, meta: dict[str, Any]) -> None:
        """Replace a session's settings atomically (a crash keeps the old or the new),
        signed, through a new file of a random name: a link planted at any name is never
        written through."""
        folder = self.state.folder("acp", create=True)
        assert folder is not None
        key = self.state.key(_PURPOSE)
        record = {k: v for k, v in meta.items() if k != "mac"}
        if key is not None:
            record["mac"] = sign(key, _canonical(record))
        else:
            logger.warning("session %s is saved unsigned (no state dir secret): it will "
                           "not load again", meta["sessionId"])  # fmt: skip
        with folder:
            folder.replace(f"{meta['sessionId']}.json", dumps(record).encode("utf-8"))

    def read(self, session_id: str) -> dict[str, Any] | Unreadable | None:
        """A session's settings if this state dir signed them, :class:`Unreadable` (and
        why) if not, ``None`` if there is no such session."""
        if not valid_session_id(session_id):
            return None
        try:
            folder = self.state.folder("acp")
        except OSError:
            return None
        if folder is None:
            return None
        with folder:
            if folder.lstat(f"{session_id}.json") is None:
                return None
            try:
                data = folder.read_bytes(f"{session_id}.json", MAX_META_BYTES)
            except OSError as exc:
                return Unreadable(session_id, f"it cannot be read ({exc.strerror or exc})")
        if data is None:
            return Unreadable(session_id, "not a regular file, or too large")
        try:
            meta = json.loads(data)
        except (ValueError, RecursionError):
            return Unreadable(session_id, "not JSON")
        if not isinstance(meta, dict):
            return Unreadable(session_id, "not a JSON object")
        claimed = meta.get("cwd") if isinstance(meta.get("cwd"), str) else None
        mac = meta.pop("mac", None)
        key = self.state.key(_PURPOSE)
        try:
            valid = key is not None and signed(key, _canonical(meta), mac)
        except ValueError:  # a number JSON has no room for
            valid = False
        if not valid:
            why = "it is not signed with this state dir's secret (planted, or from elsewhere)"
            return Unreadable(session_id, why, claimed)
        problem = _shape_problem(meta, session_id)
        if problem is not None:
            return Unreadable(session_id, problem, claimed)
        return meta

    def load(self, session_id: str) -> dict[str, Any] | None:
        """A session's settings when they are the daemon's own (see :meth:`read`)."""
        found = self.read(session_id)
        return found if isinstance(found, dict) else None

    def listing(self) -> tuple[list[dict[str, Any]], list[Unreadable]]:
        """Every session's settings that load, and the session files that do not."""
        try:
            folder = self.state.folder("acp")
        except OSError:
            return [], []
        if folder is None:
            return [], []
        with folder:
            names = sorted(e.name for e in folder.entries() if e.name.endswith(".json"))
        metas: list[dict[str, Any]] = []
        unreadable: list[Unreadable] = []
        for name in names:
            found = self.read(name[: -len(".json")])
            if isinstance(found, dict):
                metas.append(found)
            elif found is not None:
                unreadable.append(found)
        return metas, unreadable

    def all(self) -> list[dict[str, Any]]:
        return self.listing()[0]

    def append(self, session_id: str, update: dict[str, Any]) -> None:
        log = self._logs.get(session_id)
        if log is None:
            log = self._open_log(session_id)
            if log is None:
                return
        else:
            self._logs.move_to_end(session_id)
        try:
            log.write(dumps(update) + "\n")
            log.flush()
        except (OSError, ValueError) as exc:
            logger.warning("session %s: could not log an update: %s", session_id, exc)

    def _open_log(self, session_id: str) -> IO[str] | None:
        """A session's log for appending (the least recently written one closed first,
        when :data:`MAX_OPEN_LOGS` are open); ``None`` when its name is not a regular file."""
        try:
            folder = self.state.folder("acp", create=True)
            assert folder is not None
            with folder:
                fd = folder.open_append(f"{session_id}.jsonl")
        except OSError as exc:
            logger.warning("session %s: cannot open its log: %s", session_id, exc)
            return None
        if fd is None:
            return None
        while len(self._logs) >= MAX_OPEN_LOGS:
            _, oldest = self._logs.popitem(last=False)
            oldest.close()
        log = self._logs[session_id] = os.fdopen(fd, "a", encoding="utf-8")
        return log

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        """The logged updates; a torn line, an over-long one or one of the wrong shape
        (not an update object) is skipped."""
        out: list[dict[str, Any]] = []
        try:
            folder = self.state.folder("acp")
        except OSError:
            return out
        if folder is None:
            return out
        with folder:
            fd = folder.open_read(f"{session_id}.jsonl")
        if fd is None:
            return out
        try:
            with os.fdopen(fd, "rb") as handle:
                for raw in read_lines(handle, MAX_LOG_LINE):
                    try:
                        update = json.loads(raw) if raw is not None else None
                    except (ValueError, RecursionError):
                        continue
                    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
                    if isinstance(kind, str) and _UPDATE_KIND.fullmatch(kind):
                        assert isinstance(update, dict)
                        out.append(update)
        except OSError:
            pass
        return out

    def close(self, session_id: str | None = None) -> None:
        ids = [session_id] if session_id is not None else list(self._logs)
        for key in ids:
            log = self._logs.pop(key, None)
            if log is not None:
                log.close()
