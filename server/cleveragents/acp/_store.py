"""ACP sessions on disk, under ``STATE_DIR/acp/``: what survives a daemon restart.

* ``SESSION_ID.json``: the session's settings (cwd, extra directories, mode, model, MCP
  entries as the client sent them, title, update time) and its run ids in order. The
  runs themselves are the daemon's transcripts (``STATE_DIR/runs``), from which the next
  turn's conversation is rebuilt.
* ``SESSION_ID.jsonl``: the ``session/update`` payloads a ``session/load`` replays (each
  prompt, each text chunk, each tool call and its final update), one flushed line each.

Both are opened without following a link (``O_NOFOLLOW``), new files exclusively and
0600 in a 0700 folder, and read only when they are regular files (a FIFO or a device
planted there is skipped, never waited on). At most :data:`MAX_OPEN_LOGS` logs stay
open; the least recently written is closed first, and opened again when written.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import stat
import uuid
from pathlib import Path
from typing import IO, Any

from ..protocol import dumps

logger = logging.getLogger(__name__)

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
MAX_OPEN_LOGS = 32
"""Session logs kept open at once: an editor that opens a thousand chat threads and never
sends ``session/close`` holds no more descriptors than this."""
MAX_META_BYTES = 1024 * 1024
"""The largest session settings file read back."""
_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def _open_regular(path: Path, flags: int, mode: int = 0o600) -> int | None:
    """A descriptor of ``path`` opened without following a link, if it is a regular file;
    ``None`` (and a warning) for a link, a FIFO, a device or a directory."""
    try:
        fd = os.open(path, flags | _NO_FOLLOW | os.O_NONBLOCK, mode)
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("skipped %s: %s", path, exc.strerror or exc)
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        logger.warning("skipped %s: not a regular file", path)
        return None
    os.set_blocking(fd, True)
    return fd


def valid_session_id(session_id: object) -> bool:
    return isinstance(session_id, str) and _ID.fullmatch(session_id) is not None  # no "\n" after


class SessionStore:
    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "acp"
        self._logs: collections.OrderedDict[str, IO[str]] = collections.OrderedDict()

    def save(self, meta: dict[str, Any]) -> None:
        """Replace a session's settings atomically (a crash keeps the old or the new),
        through a new file of a random name: a link planted at any name is never written
        through."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.dir / f"{meta['sessionId']}.json"
        temp = self.dir / f".{meta['sessionId']}.{uuid.uuid4().hex}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(dumps(meta))
            os.replace(temp, path)  # replaces a link itself, never its target
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    def load(self, session_id: str) -> dict[str, Any] | None:
        if not valid_session_id(session_id):
            return None
        fd = _open_regular(self.dir / f"{session_id}.json", os.O_RDONLY)
        if fd is None:
            return None
        try:
            with os.fdopen(fd, "rb") as handle:
                data = json.loads(handle.read(MAX_META_BYTES + 1)[: MAX_META_BYTES + 1])
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def all(self) -> list[dict[str, Any]]:
        metas = []
        for path in self.dir.glob("*.json") if self.dir.is_dir() else ():
            meta = self.load(path.stem)
            if meta is not None:
                metas.append(meta)
        return metas

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
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = _open_regular(self.dir / f"{session_id}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        if fd is None:
            return None
        while len(self._logs) >= MAX_OPEN_LOGS:
            _, oldest = self._logs.popitem(last=False)
            oldest.close()
        log = self._logs[session_id] = os.fdopen(fd, "a", encoding="utf-8")
        return log

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        """The logged updates; a torn last line is skipped."""
        out: list[dict[str, Any]] = []
        fd = _open_regular(self.dir / f"{session_id}.jsonl", os.O_RDONLY)
        if fd is None:
            return out
        try:
            with os.fdopen(fd, encoding="utf-8") as handle:
                for raw in handle:
                    try:
                        update = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(update, dict):
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
