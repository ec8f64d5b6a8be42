"""Wire types of the ``run/*`` requests: what starts, lists and names runs.

Apart from a run's result and notifications (``_runs``) because no ``initialize``
message holds them: they are built at the first ``run/*`` request, not in the daemon's
start."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ._checkpoints import ForkFrom
from ._mcp import McpServerEntry
from ._optional import opt
from ._runs import RunStatus


@attrs.define
class RunSummary:
    """One line of ``run/list``: an active or persisted run."""

    run_id: str
    """The run id."""
    status: Literal["running", RunStatus]
    """``running`` for active runs; else the finished status."""
    prompt: str
    """The run's prompt."""
    started_at: str
    """ISO 8601 UTC time with milliseconds, e.g. ``2026-12-02T14:15:05.727+00:00``."""
    iterations: int
    """Iterations so far (active) or in total."""
    tool_call_count: int
    """Tool calls so far (active) or in total."""
    active: bool
    """``true`` while the run is in this daemon's memory."""


@attrs.define
class RunLimits:
    """Limits on a run beyond ``maxIterations``; each absent one is no limit. The run ends
    with ``status: "limit"`` and ``limitReason`` naming the one reached."""

    max_tool_calls: int | None = opt()
    """Most tool calls over the run, >= 1. An iteration asking for more than remain runs the
    first ones; the others are recorded as failed, not run (-32030)."""
    deadline_ms: int | None = opt()
    """Wall-clock budget from the run's start, >= 1; the call in flight (model or tools) is
    cancelled when it passes, and the run ends with ``limitReason: "deadline"``."""
    max_input_tokens: int | None = opt()
    """Most input tokens summed over the run's model calls, as the provider reports them."""
    max_output_tokens: int | None = opt()
    """Most output tokens summed over the run's model calls."""
    max_total_tokens: int | None = opt()
    """Most input plus output tokens. Token limits are checked after each iteration."""


@attrs.define
class CompactionSettings:
    """How a run keeps its requests within the model's context window (``docs/runtime.md``,
    "Context budget")."""

    enabled: bool | None = opt()
    """``false`` turns compaction off: a long run may then fail on the provider's context
    limit. Default ``true``."""
    compact_at: float | None = opt()
    """Share of the window past which the daemon compacts before a model call, in (0, 1];
    default 0.8. The request's ``maxTokens`` is kept free on top."""
    keep_recent_iterations: int | None = opt()
    """Iterations kept whole (never pruned nor summarised), >= 0; default 2."""
    model: str | dict[str, Any] | None = opt()
    """Model spec that writes summaries; default: the run's own model."""


@attrs.define
class RunParams:
    """Everything a run may be started with; only ``prompt`` is required."""

    prompt: str
    """The user message. Must contain a non-space character."""
    run_id: str | None = opt()
    """Your id for the run: ``^[A-Za-z0-9_.-]{1,128}$``, unused in memory and in the state dir.
    Default: a random 32-hex-digit id."""
    system_prompt: str | None = opt()
    """Added to the system message, after the daemon's instructions (alone with ``instructions:
    false``). No system message is added when the ``continueFrom`` history already has one."""
    instructions: bool | None = opt()
    """``false``: none of the daemon's instructions, which are otherwise the run's system message:
    what it is, the sandbox root, the date, the OS and shell, the tools' conventions, then the
    sandbox root's ``AGENTS.md`` (at most 32 KiB of it), and the ``AGENTS.md`` of each folder a
    file tool reaches added to that call's output (run/start's instructions, PROTOCOL.md §7).
    Default: ``initializationOptions.instructions``, else ``true``."""
    model: str | dict[str, Any] | None = opt()
    """Model spec for this run (model specs, PROTOCOL.md §14)."""
    max_iterations: int | None = opt()
    """Most LLM calls the run may make, >= 1. Default 25."""
    tools: list[str] | None = opt()
    """Allow-list of shared tools. Each name must be a shared tool when the run starts, else -32012.
    The run sees only these shared tools, plus every tool registered with its ``runId`` (run-scoped
    tools, PROTOCOL.md §7)."""
    sandbox_root: str | None = opt()
    """Absolute path at or inside a workspace folder (symlinks resolved), else -32019. Default: the
    first workspace folder."""
    plan_id: str | None = opt()
    """Passed to tools' context; not used by the daemon."""
    phase: str | None = opt()
    """Passed to tools' context; not used by the daemon."""
    automation_profile: str | None = opt()
    """Profile for this run. Default: ``initializationOptions.automationProfile``, else
    ``supervised``."""
    resource_bindings: dict[str, Any] | None = opt()
    """Free-form object given to every tool as ``resource_bindings`` (client tools:
    ``resourceBindings``)."""
    project_resources: dict[str, Any] | None = opt()
    """Free-form object kept in the run's context; not sent to tools."""
    continue_from: str | None = opt()
    """Start from the conversation of an earlier finished run: from memory when this daemon ran it
    recently, else rebuilt from its transcript (also a run of an earlier daemon process)."""
    work_done_token: str | int | None = opt()
    """LSP work-done token: the daemon reports ``$/progress`` under it."""
    mcp_servers: list[McpServerEntry] | None = opt()
    """MCP servers for this run only: started before its first iteration (the run waits up to each
    one's ``startupTimeoutMs``), their tools visible to this run alone, stopped when it ends (MCP
    servers, PROTOCOL.md §7). Checked here: a bad entry is -32602 naming its field."""
    limits: RunLimits | None = opt()
    """Tool-call, deadline and token limits on top of ``maxIterations``."""
    compaction: CompactionSettings | None = opt()
    """The context budget's settings; absent: compaction on, with its defaults."""
    checkpoints: bool | None = opt()
    """``false``: this run takes no checkpoints (no ``run/checkpoint``, an empty ``run/diff``).
    Default ``true``, unless the daemon's ``initializationOptions.checkpoints`` is ``false``."""
    fork_from: ForkFrom | None = opt()
    """Start from another run's conversation as it stood after one of its iterations (and,
    with ``restoreFiles``, its files). Not with ``continueFrom``."""


@attrs.define
class RunIdParams:
    """Params of ``run/cancel`` and ``run/get``."""

    run_id: str
    """The run id."""


@attrs.define
class EmptyParams:
    """Params of ``run/list``: an empty object."""


@attrs.define
class EmptyResult:
    """The ``{}`` reply of ``run/cancel``."""


@attrs.define
class RunListResult:
    runs: list[RunSummary]
    """Active runs first, then persisted ones, newest first."""
