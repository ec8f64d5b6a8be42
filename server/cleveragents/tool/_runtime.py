"""``ToolCallingRuntime``: the tool-calling loop, one state core and two small drivers.

``_LoopState`` is the sans-IO core: it owns the conversation, the counters and the
records, and says what happens next; it never calls a model or a tool. The sync driver
(``run_tool_loop``) and the async driver (``arun_tool_loop``) do the calling, so both stay
close to a hand-written loop of their own kind.

Semantics (design §3): an iteration is one LLM call plus the tool calls it asked for,
numbered from 1; at most ``max_iterations`` LLM calls; tool calls of one iteration run
concurrently and are recorded in the model's order; the reserved inputs come from the
context. Cancellation is cooperative, through a ``CancelToken``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ._cancel import CancelToken
from ._events import EventSink, IterationSummary, NullEventSink
from ._registry import ToolRegistry
from ._runner import ToolCallsInterrupted, ToolRunner, ToolRunSession, output_text
from ._spec import is_async_callable
from ._types import (
    LLMCaller,
    LLMRequest,
    LLMResponse,
    Message,
    ToolActorContext,
    ToolCall,
    ToolCallRecord,
    ToolCallRunResult,
    Usage,
)

DEFAULT_MAX_ITERATIONS = 25

YIELD_EVERY_S = 0.002
"""The async driver gives the event loop a turn at least this often. A model and tools
that answer without suspending (the scripted model, inline tools) would otherwise hold
the loop for a whole run: no cancel could land and other runs would wait."""

_perf = time.perf_counter
_NULL_SINK = NullEventSink()


class _NameDecoder:
    """Structural type of the router's decode step (kept loose to avoid an import cycle)."""

    def decode_name(self, encoded: str) -> str:  # pragma: no cover - protocol shape
        raise NotImplementedError


class ToolCallingRuntime:
    """Runs the tool-calling loop of one actor: model, registry, runner, optional router.

    ``llm_caller`` may be sync or async. In ``arun_tool_loop`` a sync caller runs in a
    worker thread unless it has ``blocking = False`` (like the scripted model).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        runner: ToolRunner,
        llm_caller: LLMCaller,
        router: Any | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        *,
        system_prompt: str | None = None,
        sink: EventSink | None = None,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise TypeError(f"registry must be a ToolRegistry, got {type(registry).__name__}")
        if not isinstance(runner, ToolRunner):
            raise TypeError(f"runner must be a ToolRunner, got {type(runner).__name__}")
        if not callable(llm_caller):
            raise TypeError(f"llm_caller must be callable, got {type(llm_caller).__name__}")
        if router is not None and not callable(getattr(router, "decode_name", None)):
            raise TypeError(f"router must be a ToolCallRouter, got {type(router).__name__}")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise TypeError("max_iterations must be an int")
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
        self.registry = registry
        self.runner = runner
        self.llm_caller = llm_caller
        self.router = router
        self.max_iterations = max_iterations
        self.system_prompt = system_prompt
        self.sink: EventSink = sink or _NULL_SINK
        self._caller_is_async = is_async_callable(llm_caller)
        self._caller_inline = getattr(llm_caller, "blocking", True) is False

    # -- sync driver ---------------------------------------------------------------------

    def run_tool_loop(
        self,
        prompt: str,
        context: ToolActorContext | None = None,
        *,
        system_prompt: str | None = None,
        history: Sequence[Message] | None = None,
        cancel: CancelToken | None = None,
        sink: EventSink | None = None,
        max_iterations: int | None = None,
    ) -> ToolCallRunResult:
        """Run the loop to its end in this thread and return the result."""
        state = self._start(prompt, context, system_prompt, history, cancel, sink, max_iterations)
        session = state.session
        loop_runner: asyncio.Runner | None = None
        try:
            is_cancelled = state.cancel.is_cancelled
            while not is_cancelled():
                request = state.begin_iteration()
                response = self.llm_caller(request)
                if hasattr(response, "__await__"):
                    loop_runner = loop_runner or asyncio.Runner()
                    try:
                        response = loop_runner.run(_await(response))
                    except asyncio.CancelledError:
                        if not is_cancelled():
                            raise
                        break  # the caller gave up because the run was cancelled
                calls = state.take_response(response)
                if calls:
                    state.tools_started(calls)
                    records = session.run_calls(calls, state.iteration, state.record_hook(calls))
                    state.take_records(calls, records)
                if state.end_iteration():
                    break
        finally:
            session.close()
            if loop_runner is not None:
                loop_runner.close()
        return state.finish()

    # -- async driver --------------------------------------------------------------------

    async def arun_tool_loop(
        self,
        prompt: str,
        context: ToolActorContext | None = None,
        *,
        system_prompt: str | None = None,
        history: Sequence[Message] | None = None,
        cancel: CancelToken | None = None,
        sink: EventSink | None = None,
        max_iterations: int | None = None,
    ) -> ToolCallRunResult:
        """The async twin of ``run_tool_loop``; cancel with ``cancel.cancel()``."""
        state = self._start(prompt, context, system_prompt, history, cancel, sink, max_iterations)
        session = state.session
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        interruptible = False

        def interrupt() -> None:  # on the loop thread; only at the awaits marked below
            if interruptible and task is not None:
                task.cancel()

        def on_cancel() -> None:  # any thread
            loop.call_soon_threadsafe(interrupt)

        remove = state.cancel.add_callback(on_cancel)
        last_turn = _perf()
        try:
            while not state.cancel.cancelled:
                request = state.begin_iteration()
                try:
                    interruptible = True
                    if _perf() - last_turn >= YIELD_EVERY_S:
                        await asyncio.sleep(0)
                        last_turn = _perf()
                    response = await self._acall_model(request)
                    interruptible = False
                    calls = state.take_response(response)
                    if calls:
                        state.tools_started(calls)
                        interruptible = True
                        records = await session.arun_calls(
                            calls, state.iteration, state.record_hook(calls)
                        )
                        interruptible = False
                        state.take_records(calls, records)
                except ToolCallsInterrupted as exc:
                    interruptible = False
                    if not state.cancel.cancelled:
                        raise
                    _absorb_cancel(task)
                    state.take_records(calls, exc.records)
                    state.end_iteration()
                    break
                except asyncio.CancelledError:
                    interruptible = False
                    if not state.cancel.cancelled:
                        raise
                    _absorb_cancel(task)
                    break
                if state.end_iteration():
                    break
        finally:
            interruptible = False
            remove()
            await session.aclose()
        return state.finish()

    async def _acall_model(self, request: LLMRequest) -> LLMResponse:
        caller = self.llm_caller
        if self._caller_is_async or self._caller_inline:
            response = caller(request)
        else:
            response = await asyncio.to_thread(caller, request)
        if hasattr(response, "__await__"):
            response = await response
        return response

    # -- shared --------------------------------------------------------------------------

    def _start(
        self,
        prompt: str,
        context: ToolActorContext | None,
        system_prompt: str | None,
        history: Sequence[Message] | None,
        cancel: CancelToken | None,
        sink: EventSink | None,
        max_iterations: int | None,
    ) -> _LoopState:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        if not prompt.strip():
            raise ValueError("prompt must not be empty")
        limit = self.max_iterations if max_iterations is None else max_iterations
        if limit < 1:
            raise ValueError(f"max_iterations must be at least 1, got {limit}")
        context = context if context is not None else ToolActorContext()
        cancel = cancel if cancel is not None else CancelToken()
        session = self.runner.session(context, cancel, registry=self.registry)
        return _LoopState(
            self, prompt, context, system_prompt or self.system_prompt, history,
            cancel, sink or self.sink, session, limit,
        )  # fmt: skip


class _LoopState:
    """The sans-IO core of one run: conversation, counters, records; no calls out."""

    __slots__ = (
        "_decode",
        "_emit",
        "_flushed",
        "_iteration_started",
        "_ready",
        "_runtime",
        "cancel",
        "content",
        "context",
        "iteration",
        "iteration_usage",
        "limit",
        "limit_hit",
        "messages",
        "records",
        "session",
        "sink",
        "started",
        "tool_call_count",
        "usage",
    )

    def __init__(
        self,
        runtime: ToolCallingRuntime,
        prompt: str,
        context: ToolActorContext,
        system_prompt: str | None,
        history: Sequence[Message] | None,
        cancel: CancelToken,
        sink: EventSink,
        session: ToolRunSession,
        limit: int,
    ) -> None:
        self._runtime = runtime
        router = runtime.router
        self._decode: Callable[[str], str] | None = router.decode_name if router else None
        self.context = context
        self.cancel = cancel
        self.sink = sink
        self._emit = sink is not _NULL_SINK  # skip building events nobody reads
        self._ready: list[ToolCallRecord | None] = []
        self._flushed = 0
        self.session = session
        self.limit = limit
        self.messages: list[Message] = list(history) if history else []
        if system_prompt and not any(m.role == "system" for m in self.messages):
            self.messages.insert(0, Message("system", system_prompt))
        self.messages.append(Message("user", prompt))
        self.records: list[ToolCallRecord] = []
        self.iteration = 0
        self.content = ""
        self.usage: Usage | None = None
        self.iteration_usage: Usage | None = None
        self.limit_hit = False
        self.tool_call_count = 0
        self.started = _perf()
        self._iteration_started = self.started

    def begin_iteration(self) -> LLMRequest:
        self.iteration += 1
        iteration = self.iteration
        self.tool_call_count = 0
        if self._emit:
            self._iteration_started = _perf()
            self.sink.on_iteration_started(iteration)
        return LLMRequest(
            self.messages,
            self._runtime.registry.schemas(),
            iteration,
            self.context,
            self.cancel,
            self._on_delta,
        )

    def _on_delta(self, text: str) -> None:
        if self._emit:
            self.sink.on_message_delta(self.iteration, text)

    def take_response(self, response: object) -> list[ToolCall]:
        if not isinstance(response, LLMResponse):
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
        if calls:
            decode = self._decode
            for index, call in enumerate(calls):
                if not call.id:
                    call.id = f"call_{self.iteration}_{index}"
                if decode is not None:
                    call.name = decode(call.name)
        self.messages.append(Message("assistant", content, calls))
        return calls

    def tools_started(self, calls: list[ToolCall]) -> None:
        if not self._emit:
            return
        sink = self.sink
        for call in calls:
            sink.on_tool_call_started(self.iteration, call)

    def record_hook(self, calls: list[ToolCall]) -> Callable[[int, ToolCallRecord], None] | None:
        """What the runner calls as each record is ready: it reports the record to the
        sink at once, and grows the history with every record whose predecessors (in
        the model's order) are all done. A lone call with no sink needs neither."""
        self._flushed = 0
        if len(calls) == 1 and not self._emit:
            return None
        self._ready = [None] * len(calls)
        return self._record_ready

    def _record_ready(self, index: int, record: ToolCallRecord) -> None:
        if self._emit:
            self.sink.on_tool_call(record)
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
        history = self.context.tool_call_history
        flushed = self._flushed
        for record in records[flushed:]:
            self.records.append(record)
            history.append(record)
        self._flushed = 0
        messages = self.messages
        for call, record in zip(calls, records, strict=True):
            if record.success:
                messages.append(Message("tool", output_text(record.output), [], call.id, call.name))
            else:
                text = record.error or "the tool failed"
                messages.append(Message("tool", text, [], call.id, call.name, True))

    def end_iteration(self) -> bool:
        """Report the iteration; True when the run is over (no tools, limit, or cancel)."""
        if self._emit:
            self.sink.on_iteration(
                IterationSummary(
                    self.iteration,
                    self.content,
                    self.tool_call_count,
                    (_perf() - self._iteration_started) * 1000.0,
                    self.iteration_usage,
                )
            )
        if self.tool_call_count == 0 or self.cancel.cancelled:
            return True
        if self.iteration >= self.limit:
            self.limit_hit = True
            return True
        return False

    def finish(self) -> ToolCallRunResult:
        cancelled = self.cancel.cancelled
        result = ToolCallRunResult(
            content=self.content,
            tool_call_history=self.records,
            iterations=self.iteration,
            terminated_by_limit=self.limit_hit and not cancelled,
            cancelled=cancelled,
            usage=self.usage,
            duration_ms=(_perf() - self.started) * 1000.0,
            messages=self.messages,
        )
        self.sink.on_finished(result)
        return result


def _absorb_cancel(task: asyncio.Task[Any] | None) -> None:
    """Undo the cancel this driver asked for, so the caller's task goes on normally."""
    if task is not None and task.cancelling():
        task.uncancel()


async def _await(value: Awaitable[LLMResponse]) -> LLMResponse:
    return await value
