"""The user's approvals of a workspace's ``.mcp.json`` servers, kept in the state dir.

A ``.mcp.json`` is the repository's choice, not the user's: a cloned project may name any
command. Each server is started only once the user approved it, and an approval is of
the entry exactly as written (its :func:`~cleveragents._mcp_files.fingerprint`): an
edited entry is asked about again.

``STATE/mcp-approvals/WORKSPACE_HASH.json`` holds one workspace's approvals (its real
path and ``{name: fingerprint}``), 0600 in a 0700 folder, opened beneath the state dir's
pinned descriptor (:mod:`cleveragents.statedir`), and signed with the state dir's
secret: a file planted there (by the repository, by a command a run allowed) carries
no valid signature and approves nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from .statedir import StateDir, sign, signed

logger = logging.getLogger(__name__)

FOLDER = "mcp-approvals"
PURPOSE = "mcp-approval"
MAX_BYTES = 1024 * 1024


def _canonical(record: Mapping[str, object]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def workspace_key(workspace: Path) -> str:
    """The file name of a workspace's approvals: the hash of its real path."""
    return hashlib.sha256(os.path.realpath(workspace).encode()).hexdigest()[:32] + ".json"


class Approvals:
    """One workspace's approvals in one state dir."""

    def __init__(self, state_dir: Path, workspace: Path) -> None:
        self.state = StateDir(state_dir)
        self.workspace = os.path.realpath(workspace)
        self.name = workspace_key(workspace)

    def approved(self) -> dict[str, str]:
        """``{server name: fingerprint}`` as the user approved them; ``{}`` when there is
        no file, or it is not this state dir's own (unsigned, planted, another
        workspace's), which is logged."""
        data = self.state.read_file(FOLDER, self.name, limit=MAX_BYTES)
        if data is None:
            return {}
        try:
            record = json.loads(data)
        except (ValueError, RecursionError):
            record = None
        key = self.state.key(PURPOSE)
        if not isinstance(record, dict) or key is None:
            logger.warning("ignoring %s/%s: not an approvals file", FOLDER, self.name)
            return {}
        mac = record.pop("mac", None)
        servers = record.get("servers")
        if (
            not signed(key, _canonical(record), mac)
            or record.get("workspace") != self.workspace
            or not isinstance(servers, dict)
            or not all(isinstance(v, str) for v in servers.values())
        ):
            logger.warning(
                "ignoring %s/%s: not signed with this state dir's secret (planted, or from "
                "elsewhere); it approves nothing", FOLDER, self.name,
            )  # fmt: skip
            return {}
        return dict(servers)

    def _write(self, servers: Mapping[str, str]) -> None:
        folder = self.state.folder(FOLDER, create=True)  # makes the state dir, then its key
        key = self.state.key(PURPOSE)
        if key is None or folder is None:
            raise OSError(f"cannot keep approvals in {self.state.path}: no state dir secret")
        record: dict[str, object] = {"workspace": self.workspace, "servers": dict(servers)}
        record["mac"] = sign(key, _canonical(record))
        with folder:
            folder.replace(self.name, _canonical(record))

    def approve(self, servers: Mapping[str, str]) -> None:
        """Remember ``{name: fingerprint}`` as approved (other approvals kept)."""
        self._write({**self.approved(), **servers})

    def revoke(self, names: Iterable[str] | None = None) -> list[str]:
        """Forget the approvals of ``names`` (all when ``None``); the names forgotten."""
        current = self.approved()
        chosen = None if names is None else set(names)
        gone = [n for n in current if chosen is None or n in chosen]
        if gone:
            self._write({n: f for n, f in current.items() if n not in gone})
        return gone
