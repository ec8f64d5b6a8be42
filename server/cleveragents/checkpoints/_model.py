"""What the store's operations take and return: frozen values, no I/O.

Paths are relative to the workspace root, with ``/`` separators, decoded as the
operating system's file names are (``os.fsdecode``: a name that is not UTF-8 keeps its
bytes as surrogate escapes).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

MiB = 1024 * 1024
DAY = 24 * 3600.0

ChangeStatus = Literal["added", "modified", "deleted"]


def _positive(_: object, attribute: Any, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive, not {value!r}")


@attrs.frozen
class CheckpointSettings:
    """The store's bounds, built once and handed over.

    ``max_file_bytes``: a file larger than this is recorded as not captured (never
    silently dropped). ``retention_seconds`` and ``max_store_bytes``: what
    :meth:`~cleveragents.checkpoints.CheckpointStore.prune` enforces, oldest first.
    ``max_entries``: a workspace with more captured entries is refused, since a partial
    snapshot would let a restore delete what it never saw. ``max_depth``: directories
    deeper than this are recorded as not captured. ``diff_max_bytes``: a text file
    larger than this on either side gets line counts but no hunks in a diff.
    """

    max_file_bytes: int = attrs.field(default=10 * MiB, validator=_positive)
    retention_seconds: float = attrs.field(default=14 * DAY, validator=_positive)
    max_store_bytes: int = attrs.field(default=2048 * MiB, validator=_positive)
    max_entries: int = attrs.field(default=200_000, validator=_positive)
    max_depth: int = attrs.field(default=256, validator=_positive)
    diff_max_bytes: int = attrs.field(default=MiB, validator=_positive)


@attrs.frozen
class Note:
    """A path and why it is not in a checkpoint, or why an operation left it alone."""

    path: str
    reason: str


@attrs.frozen
class Checkpoint:
    """One snapshot of a workspace.

    ``changed_paths``: the files, links and directories that differ from ``previous_id``
    (the checkpoint it was compared with when taken; ``None`` for none).
    ``not_captured``: files over the size cap and directories over the depth cap, whose
    content is not stored (a diff reports them by size and time only; a restore never
    touches them). ``skipped``: special files (FIFOs, sockets, devices) and entries
    that changed kind while they were read.
    """

    id: str
    seq: int
    created: float  # seconds since the epoch
    label: str
    run_id: str | None
    iteration: int | None
    previous_id: str | None
    changed_paths: tuple[str, ...]
    files: int
    bytes: int
    not_captured: tuple[Note, ...] = ()
    skipped: tuple[Note, ...] = ()

    @property
    def files_changed(self) -> int:
        """How many files, links and directories changed since ``previous_id``."""
        return len(self.changed_paths)


@attrs.frozen
class FileChange:
    """One file or link that differs between two states.

    ``additions`` and ``deletions`` count lines (0 for a binary file). ``binary``: the
    content is not UTF-8 text, or was not captured (``captured`` false: over the size
    cap, so only its size and time are known).
    """

    path: str
    status: ChangeStatus
    additions: int
    deletions: int
    binary: bool
    captured: bool = True


@attrs.frozen
class DiffResult:
    """The files that differ, and a unified diff of them (git's format, ``a/`` and
    ``b/`` prefixes; empty when ``patch=False`` was asked)."""

    files: tuple[FileChange, ...]
    patch: str


@attrs.frozen
class RestoreResult:
    """What a restore did, or would do, or why it refused.

    ``files``: the changes to the workspace's files (``added``: the restore creates it).
    ``conflicts``: paths that stop the restore unless forced; when there are any and
    ``force`` was not given, nothing was changed (``applied`` false). ``skipped``: paths
    a restore never touches, even forced (not captured, special files, ignored files
    in the way, entries that changed while it ran). ``restore_checkpoint_id``: the
    checkpoint taken just before the restore changed anything (restore it to undo);
    ``result_checkpoint_id``: the workspace as the restore left it (the ``expected_id``
    for that undo). Both ``None`` when nothing was applied.
    """

    checkpoint_id: str
    files: tuple[FileChange, ...]
    conflicts: tuple[Note, ...]
    skipped: tuple[Note, ...]
    applied: bool
    dry_run: bool
    restore_checkpoint_id: str | None = None
    result_checkpoint_id: str | None = None


@attrs.frozen
class PruneResult:
    """The checkpoints :meth:`~cleveragents.checkpoints.CheckpointStore.prune` removed
    (oldest first), and the store's stored bytes before and after."""

    removed: tuple[str, ...]
    bytes_before: int
    bytes_after: int
