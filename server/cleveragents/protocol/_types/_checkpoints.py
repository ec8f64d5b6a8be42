"""Wire types of checkpoints: ``run/diff``, ``run/revert``, ``checkpoint/restore`` and
``run/start``'s ``forkFrom`` (``docs/checkpoints.md``; errors -32031, -32032)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._optional import opt

ChangeStatus = Literal["added", "modified", "deleted"]


@attrs.define
class ForkFrom:
    """``run/start``'s ``forkFrom``: start from an earlier run's conversation as it stood
    after one of its iterations."""

    run_id: str
    """A finished run (of this daemon or an earlier one on the same state dir)."""
    iteration: int
    """The conversation up to and including this iteration of that run, >= 0 (0: its prompt
    alone), at most its ``iterations``."""
    restore_files: bool | None = opt()
    """``true``: first put the workspace's files back as they were after that iteration
    (that run's checkpoint), refusing, as ``run/revert`` does, when a file it would touch
    was changed after that run's last checkpoint (-32031 naming the paths). Default
    ``false``: the files are left as they are."""


@attrs.define
class FileChangeWire:
    """One file or symbolic link that differs."""

    path: str
    """Relative to the run's sandbox root, ``/``-separated."""
    status: ChangeStatus
    """``added``: it did not exist before; ``deleted``: it does not exist after."""
    additions: int
    """Lines added (0 for a binary file)."""
    deletions: int
    """Lines removed (0 for a binary file)."""
    binary: bool
    """Not UTF-8 text (or over the size cap, not captured): no line counts, no hunks."""


@attrs.define
class RunDiffParams:
    """Params of ``run/diff``."""

    run_id: str
    """A run of this daemon or of an earlier one on the same state dir."""
    iteration: int | None = opt()
    """Only what this iteration changed (>= 1). Absent: the whole run, from before its first
    mutating tool call to after its last iteration (for a live run: to the files now)."""


@attrs.define
class RunDiffResult:
    files: list[FileChangeWire]
    """Changed files, sorted by path; empty when the run changed nothing or took no
    checkpoint."""
    patch: str
    """A unified diff in git's format (``a/``, ``b/`` prefixes); ``git apply`` takes it."""


@attrs.define
class Conflict:
    path: str
    """Relative to the sandbox root."""
    reason: str
    """Why it stops the restore, e.g. ``changed after checkpoint 0123456789abcdef``."""


@attrs.define
class RunRevertParams:
    """Params of ``run/revert``."""

    run_id: str
    """A finished run; a running one is refused with -32023."""
    to_iteration: int | None = opt()
    """Put the files back as they were after this iteration (>= 0). Absent: as they were
    before the run's first mutating tool call."""
    dry_run: bool | None = opt()
    """``true``: report what it would do, change nothing."""
    force: bool | None = opt()
    """``true``: overwrite files changed since the run's last checkpoint (the conflicts)."""


@attrs.define
class CheckpointRestoreParams:
    """Params of ``checkpoint/restore``."""

    checkpoint_id: str
    """A checkpoint of a store whose workspace is at or inside a workspace folder:
    ``run/checkpoint``'s ``checkpointId`` or a ``restoreCheckpointId``."""
    dry_run: bool | None = opt()
    """``true``: report what it would do, change nothing."""
    force: bool | None = opt()
    """``true``: overwrite files changed since that workspace's newest checkpoint."""


@attrs.define
class RestoreResultWire:
    """The reply of ``run/revert`` and ``checkpoint/restore``."""

    files: list[FileChangeWire]
    """What the restore changed (or would change, for a dry run or a refusal): ``added``,
    the restore creates it; ``deleted``, the restore removes it."""
    conflicts: list[Conflict]
    """Paths changed by someone else since the last checkpoint. When there are any and
    ``force`` was not given, nothing was changed."""
    skipped: list[Conflict]
    """Paths a restore never touches, even forced (over the size cap, special files,
    ignored files in the way, entries that changed while it ran)."""
    applied: bool
    """Whether the files were changed (``false`` for a dry run, a refusal, or nothing to
    do)."""
    restore_checkpoint_id: str | None = opt()
    """Present when applied: the checkpoint taken just before; ``checkpoint/restore`` it to
    undo this restore."""
