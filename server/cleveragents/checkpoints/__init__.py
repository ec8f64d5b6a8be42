"""Checkpoints: snapshots of a workspace's files, to see, diff and undo what a run did.

* :class:`CheckpointStore`: one workspace's store, ``STATE/checkpoints/<key>/``, outside
  the workspace. :meth:`~CheckpointStore.take` snapshots the files (all of them, or
  only the paths a caller says it changed, over its previous checkpoint);
  :meth:`~CheckpointStore.diff` compares two checkpoints or one with the files now;
  :meth:`~CheckpointStore.restore` puts the files back (refusing conflicts unless forced,
  undoable); :meth:`~CheckpointStore.prune` bounds the store;
  :meth:`~CheckpointStore.changed_paths` lists what a range of checkpoints touched.
* :func:`stored_workspaces`: the workspaces a state dir holds stores of.
* :class:`CheckpointSettings`: the caps and the retention, frozen.
* The values returned: :class:`Checkpoint`, :class:`DiffResult` and :class:`FileChange`,
  :class:`RestoreResult`, :class:`PruneResult`, :class:`Note`.
* :func:`diffstat`: a diff's files as git's ``--stat`` lines, which every face prints;
  :func:`quote_path`: a path as git quotes it there.
* :class:`CheckpointError` (-32031) and :class:`CheckpointNotFoundError` (-32032).

The store is content-addressed (SHA-256 contents, one tree per directory, as git's) in
one SQLite database, and needs no ``git`` binary: the workspace's own ``.git`` is never
read nor written. ``docs/checkpoints.md`` says what is captured and why this design.

This package stands on :mod:`cleveragents.tool` (errors) and
:mod:`cleveragents.workspace` (the ``.gitignore`` matcher); it knows nothing of runs,
the wire or the faces.
"""

from __future__ import annotations

import typing

from ..tool._lazy import lazy_exports as _lazy_exports
from ._errors import CheckpointError, CheckpointNotFoundError
from ._model import (
    Checkpoint,
    CheckpointSettings,
    DiffResult,
    FileChange,
    Note,
    PruneResult,
    RestoreResult,
)

if typing.TYPE_CHECKING:
    from ._find import stored_workspaces
    from ._stat import diffstat, diffstat_totals, quote_path
    from ._store import CheckpointStore

_LAZY = {
    "CheckpointStore": "_store",
    "stored_workspaces": "_find",
    "diffstat": "_stat",
    "diffstat_totals": "_stat",
    "quote_path": "_stat",
}
"""Names whose modules (the store, SQLite, difflib) load at their first use: the daemon
builds its settings from this package's values before its ``initialize`` reply, and
opens a store only for a run (~7 ms of imports kept out of its start-up)."""


__getattr__ = _lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointNotFoundError",
    "CheckpointSettings",
    "CheckpointStore",
    "DiffResult",
    "FileChange",
    "Note",
    "PruneResult",
    "RestoreResult",
    "diffstat",
    "diffstat_totals",
    "quote_path",
    "stored_workspaces",
]
