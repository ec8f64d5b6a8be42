"""``RunSettings``: what every run of one service shares, built once and never changed.

A face builds them from its command line and its handshake (LSP's ``initialize``, the
terminal's flags and ``config.toml``), then builds the ``RunService`` from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..mcp import McpServerConfig
from ._outputs import DEFAULT_MAX_TOOL_OUTPUT_BYTES

DEFAULT_MAX_ITERATIONS = 25


@attrs.frozen(kw_only=True)
class RunSettings:
    """The service's settings (see the module docstring)."""

    state_dir: Path
    """Transcripts, cut tool outputs, MCP server logs."""
    workspace_folders: tuple[str, ...] = ()
    """Absolute paths; a run's sandbox root is at or inside one of them (a request may
    narrow them with its own ``roots``). The first is the MCP servers' directory."""
    model: object = None
    """The default model spec (a string, a dict or a ``ModelSpec``)."""
    automation_profile: str | None = None
    """The default profile; ``None``: ``supervised``."""
    custom_profiles: Mapping[str, Any] = attrs.field(factory=dict)
    default_max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_tool_output_bytes: int = DEFAULT_MAX_TOOL_OUTPUT_BYTES
    shell_env: tuple[str, ...] = ()
    """Environment names the shell (and MCP servers) may see."""
    mcp_servers: tuple[McpServerConfig, ...] = ()
    """Service-wide MCP servers, started with the service."""
