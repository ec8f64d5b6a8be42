"""The run events: one typed class per thing that happens in a run, and the sink they
go to.

    RunEvent                 (base: run_id and seq, set by the run service)
    ├── RunStarted           the run began (emitted by the run service)
    ├── IterationStarted     an LLM call is about to be made (not sent on any wire)
    ├── ReasoningDelta       the model streamed reasoning
    ├── MessageDelta         the model streamed text
    ├── AssistantMessage     the model's message carries reasoning or provider state
                             (kept in transcripts, not sent on any wire)
    ├── ToolCallStarted      a tool is about to execute
    ├── ToolCallProgress     a running tool reported progress (an MCP server's)
    ├── ToolCallFinished     a tool call ended, whatever the outcome
    ├── IterationFinished    an iteration ended, its tools included
    ├── Compacted            the conversation was compacted before a model call
    ├── HistoryRewritten     what a compaction changed (kept in transcripts, not sent)
    ├── Checkpointed         the workspace's files were snapshotted (emitted by the run
                             service; the core takes no snapshot)
    └── RunFinished          the run ended (emitted by the run service)

The loop never touches a transport: it hands each event to ``EventSink.on_event``,
whose default ignores it, so a sink that does not care about an event (or about one
added later) needs no change. The daemon maps events to notifications through the
protocol's method table, the ACP face to ``session/update``, a CLI to lines on a
terminal, a library user to whatever they like. ``on_event`` is called on the driver's
thread (the event loop for ``arun_tool_loop``) and must not block.

``RunResult`` is the face-neutral outcome of a run (what ``run/start`` answers on the
LSP wire, and what ``RunHandle.result()`` returns).
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._types import Message, ToolCallRecord, Usage

RunStatus = Literal["completed", "limit", "cancelled", "failed"]


@attrs.define(slots=True, eq=False)
class RunEvent:
    """Base of every run event. ``run_id`` and ``seq`` (the event's number in its run,
    from 1) are set by the run service; the bare loop leaves them empty."""

    run_id: str = attrs.field(default="", kw_only=True)
    seq: int = attrs.field(default=0, kw_only=True)


@attrs.define(slots=True, eq=False)
class RunStarted(RunEvent):
    sandbox_root: str
    max_iterations: int
    tools: list[str]
    """Names of the tools the run sees, sorted."""


@attrs.define(slots=True, eq=False)
class IterationStarted(RunEvent):
    iteration: int


@attrs.define(slots=True, eq=False)
class MessageDelta(RunEvent):
    iteration: int
    text: str
    """A fragment of the iteration's text, never empty."""


@attrs.define(slots=True, eq=False)
class ReasoningDelta(RunEvent):
    iteration: int
    text: str
    """A fragment of the iteration's reasoning, never empty."""


@attrs.define(slots=True, eq=False)
class AssistantMessage(RunEvent):
    """An iteration's assistant message that holds reasoning or provider state: what a
    later request must send back, so a transcript keeps it (``continueFrom``). Emitted
    after the response, before its tools run; not a notification (it is large, and of
    no use to a client)."""

    iteration: int
    message: Message


@attrs.define(slots=True, eq=False)
class ToolCallStarted(RunEvent):
    iteration: int
    call_id: str
    tool_name: str
    """The name as the model gave it (it may be unknown)."""
    inputs: dict[str, object]
    """The arguments exactly as the model sent them."""


@attrs.define(slots=True, eq=False)
class ToolCallProgress(RunEvent):
    """A running call's progress, as its tool reported it (an MCP server's
    ``notifications/progress``), coalesced: at most one every 100 ms per call."""

    call_id: str
    progress: float
    """Increases with each event of the call."""
    total: float | None = None
    """The progress at which the work is done, when known."""
    message: str | None = None
    """A short human-readable word on where the call stands (at most 500 characters)."""


@attrs.define(slots=True, eq=False)
class ToolCallFinished(RunEvent):
    record: ToolCallRecord


@attrs.define(slots=True, eq=False)
class IterationFinished(RunEvent):
    iteration: int
    content: str
    tool_call_count: int
    duration_ms: float
    usage: Usage | None = None
    context_tokens: int | None = None
    """The estimated size of the request this iteration sent (a run with a budget)."""
    context_window: int | None = None
    """The model's context window (a run with a budget)."""


@attrs.define(slots=True, eq=False)
class Compacted(RunEvent):
    """The conversation was compacted before iteration ``iteration``'s model call."""

    iteration: int
    strategy: str
    """``"prune"`` (old tool outputs stubbed) or ``"summary"`` (old messages summarised)."""
    tokens_before: int
    tokens_after: int
    messages_removed: int


@attrs.define(slots=True, eq=False)
class HistoryRewritten(RunEvent):
    """What a compaction changed, so that a transcript rebuilds the compacted
    conversation: the stubs of pruned outputs by call id, or the summary and the first
    iteration of this run kept whole. Not a notification."""

    iteration: int
    pruned: dict[str, str] = attrs.field(factory=dict)
    summary: str | None = None
    kept_from_iteration: int | None = None


@attrs.define(slots=True, eq=False)
class Checkpointed(RunEvent):
    """A snapshot of the run's workspace was taken: before its first mutating tool call
    (``files_changed`` 0, ``iteration`` the last one that had ended then), or after
    iteration ``iteration``, which ran one. ``checkpoint_id`` names it in the workspace's
    checkpoint store; ``files_changed`` counts the paths that differ from the run's
    previous snapshot."""

    iteration: int
    checkpoint_id: str
    files_changed: int


@attrs.define(slots=True)
class RunError:
    """Why a run failed (or was cancelled by a signal): a code of the error table and a
    message for a person."""

    code: int
    message: str


@attrs.define(slots=True)
class RunResult:
    """The outcome of a run, whatever face started it."""

    run_id: str
    status: RunStatus
    content: str
    tool_call_history: list[ToolCallRecord]
    iterations: int
    terminated_by_limit: bool
    duration_ms: float
    error: RunError | None = None
    usage: Usage | None = None
    omitted_records: int | None = None
    limit_reason: str | None = None


@attrs.define(slots=True, eq=False)
class RunFinished(RunEvent):
    result: RunResult


class EventSink:
    """Where a run's events go. Subclass and override ``on_event``; the default ignores
    every event, so a new kind of event never breaks an old sink."""

    __slots__ = ()

    def on_event(self, event: RunEvent, /) -> None:
        """One event of the run, in order; must not block."""
        return None


NullEventSink = EventSink
"""The library default: a sink that ignores every event."""
