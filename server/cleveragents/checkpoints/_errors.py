"""The checkpoint store's errors, on the core's tree (``cleveragents.tool``).

    CleverAgentsError
    └── CheckpointError            -32031  the store cannot do it (unusable store,
        │                                  workspace moved, too many entries)
        └── CheckpointNotFoundError -32032  no checkpoint of that id in this store

A conflict or a file a restore may not touch is not an error: it is data in the
:class:`~cleveragents.checkpoints.RestoreResult`, for the caller to show.
"""

from __future__ import annotations

from cleveragents.tool import CleverAgentsError


class CheckpointError(CleverAgentsError):
    """The checkpoint store cannot do what was asked (see the message)."""

    code = -32031


class CheckpointNotFoundError(CheckpointError):
    """No checkpoint of that id in this workspace's store (or a malformed id)."""

    code = -32032
