"""The daemon's own errors: capabilities, the session's lifecycle and the state dir.

They stand on the core's tree (``cleveragents.tool.CleverAgentsError``); the dispatcher
answers each with its ``code``. The errors of runs as the state dir knows them
(``RunNotFoundError``, ``RunStateError``, ``RunInterruptedError``) belong to the
transcript store, :mod:`cleveragents.transcripts`, which the command line reads without
the daemon.
"""

from __future__ import annotations

from cleveragents.tool import CleverAgentsError


class CapabilityError(CleverAgentsError):
    """The client did not declare a capability the request needs."""

    code = -32025


class NotInitializedError(CleverAgentsError):
    """A request before ``initialize``."""

    code = -32026


class StateDirError(CleverAgentsError):
    """The state dir cannot be created or written."""

    code = -32029
