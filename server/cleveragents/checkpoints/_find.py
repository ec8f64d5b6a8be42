"""Which workspaces have a store under a state dir: what a face searches for the store
that holds a checkpoint id it was given without its workspace."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._db import Database
from ._errors import CheckpointError

_KEY = re.compile(r"[0-9a-f]{32}")
MAX_STORES = 10_000
"""Store folders looked at, at most (a state dir is not expected to hold more)."""


def stored_workspaces(state_dir: str | Path) -> list[str]:
    """The real paths of the workspaces whose stores ``state_dir`` holds, as each store
    recorded it. A folder that is not a store of ours (a stray name, a link, a foreign or
    unreadable database) is left out."""
    top = Path(state_dir) / "checkpoints"
    try:
        names = sorted(n for n in os.listdir(top) if _KEY.fullmatch(n))[:MAX_STORES]
    except OSError:
        return []
    found: list[str] = []
    for key in names:
        try:
            database = Database.open(Path(state_dir), key)
        except CheckpointError:
            continue
        try:
            root = database.meta("root")
        except Exception:  # noqa: BLE001 - a damaged store is skipped, not fatal
            root = None
        finally:
            database.close()
        if root is not None:
            found.append(root)
    return found
