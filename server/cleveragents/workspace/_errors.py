"""The workspace's errors: a path that leaves the sandbox, an unknown automation profile.

Both stand on the core's tree (``cleveragents.tool.CleverAgentsError``), so their codes
reach the wire and the records the same way as the core's own.
"""

from __future__ import annotations

from cleveragents.tool import CleverAgentsError


class SandboxViolationError(CleverAgentsError, PermissionError):
    """A path outside the sandbox root (or a symlink, device or FIFO the tools refuse)."""

    code = -32019


class ProfileError(CleverAgentsError, ValueError):
    """An unknown automation profile, or a custom profile that is malformed."""

    code = -32024
