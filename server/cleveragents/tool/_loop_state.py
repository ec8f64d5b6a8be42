"""``LoopState``: the sans-IO core of one run of the tool-calling loop.

It owns the conversation, the counters and the records, and says what happens next; it
never calls a model or a tool. The drivers in ``_runtime.py`` do the calling. Semantics
(see ``docs/runtime.md``): an iteration is one LLM call plus the tool calls it asked
for, numbered from 1; at most ``limit`` LLM calls; tool calls of one iteration are
recorded in the model's order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ._call import OnRecord
from ._cancel import CancelToken
from ._content import tool_message
from ._context import Compaction, ContextBudget
from ._errors import ToolCancelledError
from ._events import (
    AssistantMessage,
    Compacted,
    EventSink,
    HistoryRewritten,
    IterationFinished,
    IterationStarted,
    MessageDelta,
    ReasoningDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ._limits import DEADLINE_REASON, UsageLimits
from ._registry import ToolRegistry
from ._runner import ToolRunSession
from ._types import (
    LLMRequest,
    LLMResponse,
    Message,
    ToolActorContext,
    ToolCall,
    ToolCallRecord,
    ToolCallRunResult,
    Usage,
    ignore_reasoning,
)

_perf = time.perf_counter

NULL_SINK = EventSink()


def listens(sink: object) -> bool:
    """Whether a sink reads events at all: one that keeps the base class's no-op
    ``on_event`` costs the loop no event objects."""
    on_event = getattr(type(sink), "on_event", None)
    if on_event is None:  # an object given its on_event as an attribute
        return callable(getattr(sink, "on_event", None))
    return on_event is not EventSink.on_event


def _ignore_delta(text: str) -> None:
    """The model's streamed text, when no sink reads it."""


class LoopState:
    """The sans-IO core of one run: conversation, counters, records; no calls out."""

    __slots__ = (
        "_flushed",
        "_iteration_started",
        "_ready",
        "_registry",
        "budget",
        "cancel",
        "content",
        "context",
        "context_tokens",
        "emit",
        "iteration",
        "iteration_usage",
        "limit",
        "limit_hit",
        "limit_reason",
        "limits",
        "messages",
        "model_calls",
        "prompt_message",
        "records",
        "session",
        "sink",
        "skipped",
        "started",
        "tool_call_count",
        "total_calls",
        "usage",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        prompt: str,
        context: ToolActorContext,
        system_prompt: str | None,
        history: Sequence[Message] | None,
        cancel: CancelToken,
        sink: EventSink,
        session: ToolRunSession,
        limit: int,
        budget: ContextBudget | None = None,
        limits: UsageLimits | None = None,
    ) -> None:
        self._registry = registry
        self.context = context
        self.cancel = cancel
        self.sink = sink
        self.emit = listens(sink)  # skip building events nobody reads
        self._ready: list[ToolCallRecord | None] = []
        self._flushed = 0
        self.session = session
        self.limit = limit
        self.messages: list[Message] = list(history) if history else []
        if system_prompt and not any(m.role == "system" for m in self.messages):
            self.messages.insert(0, Message("system", system_prompt))
        self.prompt_message = Message("user", prompt)
        self.messages.append(self.prompt_message)
        self.budget = budget
        self.limits = limits
        self.limit_reason: str | None = None
        self.skipped: list[ToolCall] = []
        self.total_calls = 0
        self.model_calls = 0
        self.context_tokens: int | None = None
        self.records: list[ToolCallRecord] = []
        self.iteration = 0
        self.content = ""
        self.usage: Usage | None = None
        self.iteration_usage: Usage | None = None
        self.limit_hit = False
        self.tool_call_count = 0
        self.started = _perf()
        self._iteration_started = self.started

    def begin_iteration(self, *, again: bool = False) -> LLMRequest:
        """The next model call's request; ``again``: the same iteration's call once more
        (after a compaction the provider asked for)."""
        if not again:
            self.iteration += 1
            self.tool_call_count = 0
            if self.emit:
                self._iteration_started = _perf()
                self.sink.on_event(IterationStarted(self.iteration))
        iteration = self.iteration
        schemas = self._registry.schemas()  # the same tuple until the tools change
        budget = self.budget
        if budget is not None:
            self.context_tokens = budget.estimate(self.messages, schemas)
            budget.sent(self.messages)
        # The bound method is made per request, not kept on self: kept, it would make the
        # state a reference cycle, and a finished run's whole history would wait for a
        # full garbage collection instead of being freed when the run lets go of it.
        if self.emit:
            return LLMRequest(
                self.messages, schemas, iteration, self.context, self.cancel,
                self._on_delta, self._on_reasoning,
            )  # fmt: skip
        return LLMRequest(
            self.messages, schemas, iteration, self.context, self.cancel,
            _ignore_delta, ignore_reasoning,
        )  # fmt: skip

    def _on_delta(self, text: str) -> None:
        if text:
            self.sink.on_event(MessageDelta(self.iteration, text))

    def _on_reasoning(self, text: str) -> None:
        if text:
            self.sink.on_event(ReasoningDelta(self.iteration, text))

    def take_response(self, response: object) -> list[ToolCall]:
        if response.__class__ is not LLMResponse and not isinstance(response, LLMResponse):
            raise TypeError(
                f"the LLM caller must return an LLMResponse, got {type(response).__name__}"
            )
        content = response.content or ""
        self.content = content
        usage = response.usage
        self.iteration_usage = usage
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage
        calls = response.tool_calls
        budget = self.budget
        if budget is not None:
            budget.reported(usage.input_tokens if usage is not None else None)
            budget.iteration_started(self.iteration, len(self.messages))
        if calls:
            for index, call in enumerate(calls):
                if not call.id:
                    call.id = f"call_{self.iteration}_{index}"
            if self.emit:
                on_event = self.sink.on_event
                iteration = self.iteration
                for call in calls:
                    on_event(ToolCallStarted(iteration, call.id, call.name, call.arguments))
        message = Message("assistant", content, calls)
        if response.reasoning or response.state is not None or response.origin is not None:
            message.reasoning = response.reasoning
            message.state = response.state
            message.origin = response.origin
            if self.emit and message.carries_state():
                self.sink.on_event(AssistantMessage(self.iteration, message))
        self.messages.append(message)
        limits = self.limits
        if calls and limits is not None and limits.max_tool_calls is not None:
            remaining = max(0, limits.max_tool_calls - self.total_calls)
            if len(calls) > remaining:
                calls, self.skipped = calls[:remaining], calls[remaining:]
                self.limit_reason = "toolCalls"
        self.total_calls += len(calls)
        return calls

    def record_hook(self, calls: list[ToolCall]) -> OnRecord | None:
        """What the runner calls as each record is ready: it reports the record to the
        sink at once, and grows the history with every record whose predecessors (in
        the model's order) are all done. A lone call with no sink needs neither (a
        driver may skip asking: ``len(calls) == 1 and not emit``)."""
        if len(calls) == 1 and not self.emit:
            return None
        self._flushed = 0
        self._ready = [None] * len(calls)
        return self._record_ready

    def _record_ready(self, index: int, record: ToolCallRecord) -> None:
        if self.emit:
            self.sink.on_event(ToolCallFinished(record))
        ready = self._ready
        ready[index] = record
        flushed = self._flushed
        if index != flushed:
            return  # an earlier call is still running: this record waits its turn
        history = self.context.tool_call_history
        count = len(ready)
        while flushed < count:
            done = ready[flushed]
            if done is None:
                break
            self.records.append(done)
            history.append(done)
            flushed += 1
        self._flushed = flushed

    def take_records(self, calls: list[ToolCall], records: list[ToolCallRecord]) -> None:
        """Append this iteration's remaining records (model order) and the result messages."""
        self.tool_call_count = len(records)
        flushed = self._flushed
        if flushed:  # the record hook already moved these into the history
            self._flushed = 0
            rest = records[flushed:]
        else:
            rest = records
        if rest:
            self.records += rest
            self.context.tool_call_history += rest
        append = self.messages.append
        for record in records:  # a record names its call: its id and tool name
            if record.success and record.output.__class__ is str:
                append(Message("tool", record.output, [], record.call_id, record.tool_name))
            else:  # media apart, as placeholders in the text (see _content)
                append(tool_message(record))

    def end_iteration(self) -> bool:
        """Report the iteration; True when the run is over (no tools, limit, or cancel)."""
        if self.skipped:
            self._record_skipped()
        if self.emit:
            budget = self.budget
            self.sink.on_event(
                IterationFinished(
                    self.iteration,
                    self.content,
                    self.tool_call_count,
                    (_perf() - self._iteration_started) * 1000.0,
                    self.iteration_usage,
                    self.context_tokens,
                    budget.window if budget is not None else None,
                )
            )
        if self.tool_call_count == 0 or self.cancel.cancelled:
            return True
        limits = self.limits
        if limits is not None:
            if self.limit_reason is not None or (
                limits.max_tool_calls is not None and self.total_calls >= limits.max_tool_calls
            ):
                self.limit_reason = "toolCalls"
            elif limits.tokens_reached(self.usage):
                self.limit_reason = "tokens"
            if self.limit_reason is not None:
                self.limit_hit = True
                return True
        if self.iteration >= self.limit:
            self.limit_hit = True
            self.limit_reason = "iterations"
            return True
        return False

    def _record_skipped(self) -> None:
        """The calls past the tool-call limit: recorded, in the model's order, as not run."""
        skipped, self.skipped = self.skipped, []
        limit = self.limits.max_tool_calls if self.limits is not None else None
        error = f"not run: the run reached its limit of {limit} tool calls"
        code = ToolCancelledError.code
        for call in skipped:
            record = ToolCallRecord(
                call.name, call.arguments, None, 0.0, False, error, self.iteration, call.id, code
            )
            if self.emit:
                self.sink.on_event(ToolCallFinished(record))
            self.records.append(record)
            self.context.tool_call_history.append(record)
            self.messages.append(Message("tool", error, [], call.id, call.name, True))
        self.tool_call_count += len(skipped)

    # -- the context budget ---------------------------------------------------------------

    def over_budget(self) -> int | None:
        """The next request's estimate when it is past the budget's limit, else None."""
        budget = self.budget
        if budget is None:
            return None
        estimate = budget.estimate(self.messages, self._registry.schemas())
        return estimate if budget.over(estimate) else None

    def compacted(self, step: Compaction) -> None:
        """Report one compaction step (before iteration ``iteration + 1``'s call)."""
        if not self.emit:
            return
        iteration = self.iteration + 1
        self.sink.on_event(
            Compacted(
                iteration, step.strategy, step.tokens_before, step.tokens_after,
                step.messages_removed,
            )
        )  # fmt: skip
        self.sink.on_event(
            HistoryRewritten(iteration, step.pruned, step.summary, step.kept_from_iteration)
        )

    def finish(self) -> ToolCallRunResult:
        deadline = self.cancel.reason == DEADLINE_REASON and self.limit_reason == "deadline"
        cancelled = self.cancel.cancelled and not deadline
        limited = (self.limit_hit or deadline) and not cancelled
        result = ToolCallRunResult(
            content=self.content,
            tool_call_history=self.records,
            iterations=self.iteration,
            terminated_by_limit=limited,
            cancelled=cancelled,
            usage=self.usage,
            duration_ms=(_perf() - self.started) * 1000.0,
            messages=self.messages,
            limit_reason=self.limit_reason if limited else None,
        )
        return result
