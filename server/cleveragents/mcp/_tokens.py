"""Where an MCP server's OAuth tokens and client registration are kept: one file per
server name under ``STATE/mcp-auth/``, 0600 in a 0700 folder, opened by descriptor
(:mod:`cleveragents.statedir`: no link followed, replaced atomically).

A file records the URL it was granted for: a later entry of the same name that points
elsewhere is given nothing (a token goes only to the server that was granted it). The
content is plain JSON (the SDK's token and client records as they dump); this module
knows nothing of OAuth beyond that and never logs what it holds.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from cleveragents.statedir import StateDir

logger = logging.getLogger("cleveragents.mcp")

FOLDER = "mcp-auth"
MAX_FILE_BYTES = 256 * 1024
"""A token file larger than this is not ours (or not sane): it is ignored."""


class TokenStore:
    """The ``mcp-auth`` folder of one state dir; thread-safe, every call a short file
    operation (callers on the event loop may call it directly)."""

    def __init__(self, state_dir: Path | str) -> None:
        self._state = StateDir(state_dir)
        self._lock = threading.Lock()

    def load(self, name: str, url: str) -> dict[str, Any]:
        """What is kept for server ``name`` at ``url`` (``tokens``, ``client``,
        ``expires_at``); empty when nothing is, or it was kept for another URL."""
        with self._lock:
            raw = self._state.read_file(FOLDER, _file(name), limit=MAX_FILE_BYTES)
        if raw is None:
            return {}
        try:
            record = json.loads(raw)
        except ValueError:
            logger.warning("MCP server %s: its token file is not JSON; ignored", name)
            return {}
        if not isinstance(record, dict) or record.get("url") != url:
            return {}
        return record

    def update(self, name: str, url: str, **fields: Any) -> None:
        """Set ``fields`` in the record of ``name`` at ``url`` (a record for another URL
        is replaced)."""
        record = self.load(name, url) or {"url": url}
        record.update(fields)
        data = json.dumps(record, separators=(",", ":")).encode()
        with self._lock, self._state.folder(FOLDER, create=True) as folder:  # type: ignore[union-attr]
            folder.replace(_file(name), data)

    def forget_tokens(self, name: str, url: str) -> None:
        """Drop the tokens of ``name`` but keep its client registration."""
        record = self.load(name, url)
        if "tokens" in record:
            self.update(name, url, tokens=None, expires_at=None)

    def forget(self, name: str) -> bool:
        """Delete what is kept for ``name``; whether there was anything."""
        with self._lock:
            try:
                folder = self._state.folder(FOLDER)
            except OSError:
                return False
            if folder is None:
                return False
            with folder:
                if folder.lstat(_file(name)) is None:
                    return False
                folder.unlink(_file(name))
                return True


def _file(name: str) -> str:
    # Server names match ^[A-Za-z0-9_-]{1,64}$: safe as a file name as they are.
    return f"{name}.json"
