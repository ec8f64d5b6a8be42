"""Wire types of runs: a run's result and its notifications (``_run_requests`` holds the
``run/*`` requests' own).

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
