"""What every run of a daemon (or of an ACP session) shares: its configuration, set by
the command line and ``initialize``, and how a run's permission policy is built."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from ..tool import ToolPolicy
from ._outputs import DEFAULT_MAX_TOOL_OUTPUT_BYTES

PolicyFactory = Callable[[str, str | None], ToolPolicy | None]
"""Builds a run's permission policy from its run id and profile name (``None``: the
default); raises ``ProfileError`` for an unknown profile."""


@attrs.define
class DaemonConfig:
    """What ``initialize`` and the command line set for every run."""

    state_dir: Path
    model: object = None
    automation_profile: str | None = None
    client_permissions: bool = False
    client_llm: bool = False
    default_max_iterations: int = 25
    custom_profiles: dict[str, Any] = attrs.field(factory=dict)
    max_tool_output_bytes: int = DEFAULT_MAX_TOOL_OUTPUT_BYTES
    shell_env: list[str] = attrs.field(factory=list)
    """``initializationOptions.shellEnv``: also passed to MCP servers' environment."""
