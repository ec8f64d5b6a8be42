"""The workspace's errors, and how their messages name what the model gave.

* :class:`SandboxViolationError` (code -32019): a path that leaves the sandbox, or a
  file the tools refuse (a device, a FIFO, a hard-linked file to write).
* :class:`ProfileError` (code -32024): an unknown or malformed automation profile.
* :class:`WorkspaceToolError`: a built-in tool failed for another reason (a missing
  file, an ambiguous edit, a timed-out command); it has the core's generic tool code.

All stand on the core's tree (``cleveragents.tool.CleverAgentsError``), so their codes
reach the wire and the records the same way as the core's own. None is also a built-in
error: a refusal is not an ``OSError`` (nor a ``PermissionError``), so the ``except
OSError`` around an open cannot turn it into a failure to open. :func:`show` quotes a
path or pattern in a message as the model gave it (``docs/security.md`` §2).
"""

from __future__ import annotations

from collections.abc import Sequence

from cleveragents.tool import CleverAgentsError, ToolError

_SHOW_MAX = 120


class SandboxViolationError(CleverAgentsError):
    """A path outside the sandbox root (or a symlink, device or FIFO the tools refuse)."""

    code = -32019


class ProfileError(CleverAgentsError):
    """An unknown automation profile, or a custom profile that is malformed."""

    code = -32024


class WorkspaceToolError(ToolError):
    """A file or shell tool failed for a reason other than the sandbox.

    A missing file, a binary file, an ambiguous edit, an invalid regex, a timed-out
    command. The runner records the message as the call's error.
    """


def show(text: str) -> str:
    """Quote a path or pattern for an error message, as the model gave it.

    Control characters (NUL included) are escaped; very long values are abbreviated.
    """
    if len(text) > _SHOW_MAX:
        return f"{text[:100]!r}... ({len(text)} characters)"
    return repr(text)


NAMED_IN_NOTE = 3
"""Items a note names one by one; the rest are counted."""


def name_some(items: Sequence[str]) -> str:
    """The first :data:`NAMED_IN_NOTE` of ``items``, and how many more: ``a, b, c and 2 more``."""
    named = ", ".join(items[:NAMED_IN_NOTE])
    more = len(items) - NAMED_IN_NOTE
    return f"{named} and {more} more" if more > 0 else named
