"""``DaemonConfig``: what the command line sets for the daemon, built once.

At ``initialize`` the daemon adds the client's options and capabilities to it, builds
the run service's frozen ``RunSettings`` from both, then the service.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from ..mcp import McpServerConfig


@attrs.frozen
class DaemonConfig:
    """The command line's settings (``initializationOptions`` may override each)."""

    state_dir: Path
    model: object = None
    automation_profile: str | None = None
    mcp_servers: tuple[McpServerConfig, ...] = ()
    """``config.toml``'s MCP servers (``serve`` reads it); an ``initializationOptions``
    entry of the same name replaces one."""
    checkpoints: bool = True
    """``False`` (``serve --no-checkpoints``): no run takes checkpoints."""
    instructions: bool = True
    """``False`` (``serve --no-instructions``): runs get no default system prompt, unless
    ``initializationOptions`` or ``run/start`` ask for it."""
