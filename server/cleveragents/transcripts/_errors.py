"""The errors of runs as the state dir knows them: unknown, in the wrong state,
interrupted.

They stand on the core's tree (``cleveragents.tool.CleverAgentsError``). The store raises
them; the daemon raises them too (an unknown run id, a run id already in use) and answers
each with its ``code``.
"""

from __future__ import annotations

from cleveragents.tool import CleverAgentsError


class RunNotFoundError(CleverAgentsError):
    """No run with that id, live or in the state dir."""

    code = -32022


class RunStateError(CleverAgentsError):
    """A run id already in use, or a run in the wrong state for the request."""

    code = -32023


class RunInterruptedError(CleverAgentsError):
    """The daemon stopped before the run ended (found in its transcript at restart)."""

    code = -32028
