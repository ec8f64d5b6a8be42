"""ACP sessions on disk, under ``STATE_DIR/acp/``: what survives a daemon restart.

* ``SESSION_ID.json``: the session's settings (cwd, extra directories, mode, model, MCP
  entries as the client sent them, title, update time) and its run ids in order. The
  runs themselves are the daemon's transcripts (``STATE_DIR/runs``), from which the next
  turn's conversation is rebuilt.
* ``SESSION_ID.jsonl``: the ``session/update`` payloads a ``session/load`` replays (each
  prompt, each text chunk, each tool call and its final update), one flushed line each.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import IO, Any

from ..protocol import dumps

logger = logging.getLogger(__name__)

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def valid_session_id(session_id: object) -> bool:
    return isinstance(session_id, str) and _ID.fullmatch(session_id) is not None  # no "\n" after


class SessionStore:
    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "acp"
        self._logs: dict[str, IO[str]] = {}

    def save(self, meta: dict[str, Any]) -> None:
        """Replace a session's settings atomically (a crash keeps the old or the new)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{meta['sessionId']}.json"
        temp = path.with_suffix(".json.tmp")
        temp.write_text(dumps(meta), encoding="utf-8")
        os.replace(temp, path)

    def load(self, session_id: str) -> dict[str, Any] | None:
        if not valid_session_id(session_id):
            return None
        try:
            data = json.loads((self.dir / f"{session_id}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
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
            self.dir.mkdir(parents=True, exist_ok=True)
            log = self._logs[session_id] = open(  # noqa: SIM115 - kept open for the session
                self.dir / f"{session_id}.jsonl", "a", encoding="utf-8"
            )
        try:
            log.write(dumps(update) + "\n")
            log.flush()
        except (OSError, ValueError) as exc:
            logger.warning("session %s: could not log an update: %s", session_id, exc)

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        """The logged updates; a torn last line is skipped."""
        out = []
        try:
            with open(self.dir / f"{session_id}.jsonl", encoding="utf-8") as handle:
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
