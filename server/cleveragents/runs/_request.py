"""``RunRequest``: one run, as a face asks for it, in Python names.

It carries what the LSP wire's ``run/start`` carries, plus what only a face can lend
as callbacks: how to ask the user (``ask``), a hook when a call is allowed to run
(``on_authorized``), backpressure (``pace``), and a model of its own (``model_caller``,
the editor's model).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from ..llm.spec import ModelSpec
from ..mcp import McpServerConfig
from ..tool import LLMCaller, PermissionOutcome, PermissionQuery, ToolRegistry, UsageLimits

AskUser = Callable[[PermissionQuery, str], Awaitable[PermissionOutcome | str]]
"""Asks the user about a call the profile says to ask about (the query and why)."""


@attrs.frozen(kw_only=True)
class CompactionSettings:
    """How a run keeps its requests within the model's context window (see
    ``cleveragents.tool.ContextPolicy``): ``model`` writes the summaries (default the
    run's own)."""

    enabled: bool = True
    compact_at: float = 0.8
    keep_recent_iterations: int = 2
    model: str | Mapping[str, Any] | ModelSpec | None = None


@attrs.frozen
class ForkFrom:
    """Start from run ``run_id``'s conversation as it stood after its iteration
    ``iteration`` (0: its prompt alone). ``restore_files``: first put the workspace's files
    back as they were then (that run's checkpoint), refusing as a revert does when a file
    it would touch was changed after that run's last checkpoint."""

    run_id: str
    iteration: int
    restore_files: bool = False


@attrs.frozen(kw_only=True)
class RunRequest:
    """Everything a run may be started with; only ``prompt`` is required."""

    prompt: str
    run_id: str | None = None
    """``^[A-Za-z0-9_.-]{1,128}$``; default a random 32-hex-digit id."""
    system_prompt: str | None = None
    """Added after the default instructions (alone, with ``instructions=False``)."""
    instructions: bool | None = None
    """The default system prompt and the workspace's ``AGENTS.md``
    (:mod:`~cleveragents.runs._instructions`); ``None``: the service's setting."""
    model: str | Mapping[str, Any] | ModelSpec | None = None
    """The model spec; default the service's."""
    max_iterations: int | None = None
    tools: Sequence[str] | None = None
    """Allow-list of shared tools (default all)."""
    sandbox_root: str | None = None
    """At or inside one of ``roots``; default the first."""
    roots: Sequence[str] | None = None
    """The folders this run may have as its sandbox root (default the service's
    workspace folders)."""
    automation_profile: str | None = None
    plan_id: str | None = None
    phase: str | None = None
    resource_bindings: Mapping[str, Any] | None = None
    project_resources: Mapping[str, Any] | None = None
    continue_from: str | None = None
    """A finished run whose conversation this one continues."""
    mcp_servers: Sequence[McpServerConfig] = ()
    """MCP servers for this run alone, started before its first iteration."""
    registry: ToolRegistry | None = None
    """A ``ToolRegistry`` the run's tools stand on instead of the service's shared one
    (a face's own layer over it, e.g. an ACP session's tools)."""
    ask: AskUser | None = None
    """Without it, a call the profile would ask about is refused."""
    on_authorized: Callable[[PermissionQuery], Awaitable[None]] | None = None
    """Awaited when a call is allowed to run, just before it runs."""
    pace: Callable[[], Awaitable[None]] | None = None
    """Awaited before each model call and each tool call (backpressure)."""
    model_caller: LLMCaller | None = None
    """The model itself, lent by the face (the ``client`` provider's)."""
    limits: UsageLimits | None = None
    """Tool-call, deadline and token limits on top of ``max_iterations``."""
    compaction: CompactionSettings = CompactionSettings()
    """The context budget's settings."""
    checkpoints: bool = True
    """Snapshot the workspace before the run's first mutating tool call and after each
    iteration that ran one (``False``, or the service's ``checkpoints=False``: none)."""
    fork_from: ForkFrom | None = None
    """Start from another run's conversation at one of its iterations (not with
    ``continue_from``)."""
