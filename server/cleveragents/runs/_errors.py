"""The run service's own errors: a capability a run needs that its face did not lend,
and a state dir that cannot be written.

They stand on the core's tree (``cleveragents.tool.CleverAgentsError``); every face
answers each with its ``code``. The errors of runs as the state dir knows them
(``RunNotFoundError``, ``RunStateError``, ``RunInterruptedError``) belong to the
transcript store, :mod:`cleveragents.transcripts`.
"""

from __future__ import annotations

from ..tool import CleverAgentsError


class CapabilityError(CleverAgentsError):
    """The run needs something its face did not declare or lend (the client's model,
    the MCP SDK)."""

    code = -32025


class StateDirError(CleverAgentsError):
    """The state dir cannot be created or written."""

    code = -32029
