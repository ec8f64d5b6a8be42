"""The daemon's errors: runs, capabilities, the session's lifecycle and the state dir.

They stand on the core's tree (``cleveragents.tool.CleverAgentsError``); the dispatcher
answers each with its ``code``.
"""

from __future__ import annotations

from cleveragents.tool import CleverAgentsError


class RunNotFoundError(CleverAgentsError, KeyError):
    """No run with that id, live or in the state dir."""

    code = -32022

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.message


class RunStateError(CleverAgentsError):
    """A run id already in use, or a run in the wrong state for the request."""

    code = -32023


class CapabilityError(CleverAgentsError):
    """The client did not declare a capability the request needs."""

    code = -32025


class NotInitializedError(CleverAgentsError):
    """A request before ``initialize``."""

    code = -32026


class RunInterruptedError(CleverAgentsError):
    """The daemon stopped before the run ended (found in its transcript at restart)."""

    code = -32028


class StateDirError(CleverAgentsError):
    """The state dir cannot be created or written."""

    code = -32029
