"""``RunSettings``: what every run of one service shares, built once and never changed.

A face builds them from its command line and its handshake (LSP's ``initialize``, the
terminal's flags and ``config.toml``), then builds the ``RunService`` from them.

:func:`warn_if_state_dir_inside` checks the one setting a user can get dangerously
wrong: a state dir inside a sandbox root (a per-project ``--state-dir .cleveragents``,
an editor opened on a folder that holds it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..checkpoints import CheckpointSettings
from ..mcp import McpServerConfig
from ._instructions import Clock, local_now
from ._outputs import DEFAULT_MAX_TOOL_OUTPUT_BYTES

logger = logging.getLogger(__name__)

DEFAULT_MAX_ITERATIONS = 25
_warned: set[tuple[str, str]] = set()


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
    checkpoints: bool = True
    """``False``: no run takes checkpoints, whatever its request says."""
    checkpoint_settings: CheckpointSettings = attrs.field(factory=CheckpointSettings)
    """The checkpoint stores' caps and retention (``docs/checkpoints.md``)."""
    instructions: bool = True
    """Give each run the default system prompt and the workspace's ``AGENTS.md`` (a
    request may say otherwise)."""
    clock: Clock = local_now
    """The date the default system prompt states (a test fixes it)."""


def state_dir_inside(state_dir: Path, roots: Iterable[str]) -> str | None:
    """The first of ``roots`` that holds the state dir (or is it), by real paths."""
    state = os.path.realpath(state_dir)
    for root in roots:
        real = os.path.realpath(root)
        if state == real or state.startswith(real.rstrip(os.sep) + os.sep):
            return root
    return None


def warn_if_state_dir_inside(state_dir: Path, roots: Iterable[str]) -> None:
    """Warn, once per state dir and root, when a sandbox root holds the state dir: the
    built-in file tools refuse to touch it and a confined shell does not see it, but an
    unconfined command could plant files there."""
    root = state_dir_inside(state_dir, roots)
    if root is None or (str(state_dir), root) in _warned:
        return
    _warned.add((str(state_dir), root))
    logger.warning(
        "the state dir %s lies inside the sandbox root %s: the built-in file tools refuse "
        "to read or write it and a confined shell does not see it, but a command run "
        "without bubblewrap can change it; choose a state dir outside the workspace "
        "(--state-dir, or XDG_STATE_HOME)", state_dir, root,
    )  # fmt: skip
