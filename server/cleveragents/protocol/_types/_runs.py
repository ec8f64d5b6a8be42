"""Wire types of runs: ``run/*`` requests and results, and the notifications of a run.

``ToolCallRecord`` is the core's own record, reused on the wire as it is.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ...tool import (
    Checkpointed,
    Compacted,
    IterationFinished,
    MessageDelta,
    ReasoningDelta,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallRecord,
    ToolCallStarted,
)
from ._checkpoints import ForkFrom
from ._mcp import McpServerEntry
from ._optional import opt, run_notification

RunStatus = Literal["completed", "limit", "cancelled", "failed"]
LimitReason = Literal["iterations", "toolCalls", "deadline", "tokens"]


@attrs.define
class UsageWire:
    input_tokens: int
    """Prompt tokens, cached ones included."""
    output_tokens: int
    """Completion tokens, reasoning included."""
    cache_read_tokens: int | None = opt()
    """Of ``inputTokens``, those read from the provider's prompt cache, when it says."""
    cache_write_tokens: int | None = opt()
    """Of ``inputTokens``, those written to the provider's prompt cache, when it says."""
    reasoning_tokens: int | None = opt()
    """Of ``outputTokens``, those spent reasoning, when the provider says."""


@attrs.define
class RunError:
    code: int
    """An error code (PROTOCOL.md §18)."""
    message: str
    """Human-readable cause."""


@attrs.define
class RunResult:
    """The outcome of a run: the ``run/start`` reply, ``run/get``, and ``run/finished``."""

    run_id: str
    """The run id."""
    status: RunStatus
    """How the run ended."""
    content: str
    """Text of the last LLM response; ``""`` when it had none. Always ``""`` for ``failed``."""
    tool_call_history: list[ToolCallRecord]
    """Every tool call of the run, in iteration order, and within an iteration in the order the
    model listed them (not the order of the ``run/toolCall`` notifications)."""
    iterations: int
    """Number of LLM calls made (including one that failed or was cancelled)."""
    terminated_by_limit: bool
    """``true`` only for ``status: "limit"``."""
    duration_ms: float
    """Wall time of the run."""
    error: RunError | None = opt()
    """Present only for ``status: "failed"``."""
    usage: UsageWire | None = opt()
    """Token usage summed over iterations. Absent when the model reports none."""
    omitted_records: int | None = opt()
    """How many of the oldest records ``toolCallHistory`` leaves out because the result would not
    fit one 64 MiB frame; each was sent in its own ``run/toolCall`` and is in the transcript."""
    limit_reason: LimitReason | None = opt()
    """Present only for ``status: "limit"``: which limit ended the run (``iterations``:
    ``maxIterations``; the others: ``limits``)."""


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


@run_notification("run/started", RunStarted, "The run began.")
@attrs.define
class RunStartedNotification:
    run_id: str
    """The run id."""
    seq: int
    """Always 1."""
    sandbox_root: str
    """The run's sandbox root (absolute path)."""
    max_iterations: int
    """The run's iteration limit."""
    tools: list[str]
    """Names of the tools the run sees, sorted, after the allow-list."""


@run_notification("run/reasoningDelta", ReasoningDelta, "The model streamed reasoning.")
@attrs.define
class ReasoningDeltaNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number."""
    iteration: int
    """The iteration whose LLM call is reasoning."""
    text: str
    """A fragment of readable reasoning (a thinking block, a reasoning summary), never
    empty. Concatenate the fragments of one iteration; they come before or between that
    iteration's ``run/messageDelta`` fragments, in the order the provider streamed them."""


@run_notification("run/messageDelta", MessageDelta, "The model streamed text.")
@attrs.define
class MessageDeltaNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number."""
    iteration: int
    """The iteration whose LLM call is streaming."""
    text: str
    """A fragment of text, never empty. Concatenate the fragments of one iteration."""


@run_notification("run/toolCallStarted", ToolCallStarted, "A tool is about to execute.")
@attrs.define
class ToolCallStartedNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number."""
    iteration: int
    """The iteration."""
    call_id: str
    """The call id, as in the later record."""
    tool_name: str
    """The tool name as the model gave it (it may be unknown)."""
    inputs: dict[str, Any]
    """The arguments exactly as the model sent them."""


@run_notification("run/toolCallProgress", ToolCallProgress, "A running tool reported its progress.")
@attrs.define
class ToolCallProgressNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number."""
    call_id: str
    """The call, as in its ``run/toolCallStarted`` and later record."""
    progress: float
    """Increases with each notification of the call."""
    total: float | None = opt()
    """The progress at which the work is done, when the tool knows it."""
    message: str | None = opt()
    """A short word on where the call stands (at most 500 characters). Coalesced: at most
    one notification per call every 100 ms, the latest progress kept."""


@run_notification("run/toolCall", ToolCallFinished, "A tool call ended, whatever the outcome.")
@attrs.define
class ToolCallNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number."""
    record: ToolCallRecord
    """The record of the ended call."""


@run_notification("run/iteration", IterationFinished, "An iteration ended, its tools included.")
@attrs.define
class IterationNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number."""
    iteration: int
    """The iteration that ended."""
    content: str
    """The text of this iteration's LLM response; ``""`` when none."""
    tool_call_count: int
    """Number of tool calls this iteration asked for."""
    duration_ms: float
    """Wall time of the iteration (LLM call and tools)."""
    usage: UsageWire | None = opt()
    """Usage of this LLM call, when the model reports it."""
    context_tokens: int | None = opt()
    """The estimated size of the request this iteration sent, in tokens (a run whose model's
    context window is known)."""
    context_window: int | None = opt()
    """The model's context window, in tokens (as ``contextTokens``)."""


@run_notification("run/compacted", Compacted, "The conversation was compacted before a model call.")
@attrs.define
class CompactedNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number."""
    iteration: int
    """The iteration whose model call the compaction made room for."""
    strategy: Literal["prune", "summary"]
    """``prune``: outputs of older tool calls became short stubs; ``summary``: older messages
    became one summary written by the model."""
    tokens_before: int
    """The estimated request size before, in tokens."""
    tokens_after: int
    """The estimated request size after, in tokens."""
    messages_removed: int
    """Messages the summary replaced (0 for ``prune``, which removes none)."""


@run_notification("run/checkpoint", Checkpointed, "The run's workspace files were snapshotted.")
@attrs.define
class CheckpointNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number."""
    iteration: int
    """After this iteration. The run's first checkpoint, taken just before its first mutating
    tool call runs (``filesChanged`` 0), carries the last iteration that had ended then (0
    when the mutating call is in iteration 1)."""
    checkpoint_id: str
    """The checkpoint's id (16 lowercase hex digits), for ``checkpoint/restore``."""
    files_changed: int
    """Files, links and directories that differ from the run's previous checkpoint."""


@run_notification("run/finished", RunFinished, "The run ended; nothing more is sent for it.")
@attrs.define
class RunFinishedNotification:
    run_id: str
    """The run id."""
    seq: int
    """Per-run sequence number; the last one."""
    result: RunResult
    """The same object as the ``run/start`` reply."""
