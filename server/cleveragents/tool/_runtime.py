"""``ToolCallingRuntime``: the tool-calling loop, one state core and two small drivers.

``LoopState`` (``_loop_state.py``) is the sans-IO core: conversation, counters, records,
and what happens next. The sync driver (``run_tool_loop``) and the async driver
(``arun_tool_loop``) do the calling. The sync driver runs in the caller's thread for as
long as the model and the tools are sync (blocking tools in the shared pool); the first
time the run must await (an async model, an async tool, an async policy) it hands the
rest of the run to the async driver, on one private event loop for the run, so no call
pays for a loop or a thread hop of its own. Cancellation is cooperative, through a ``CancelToken``.
See ``docs/runtime.md``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from ._call import ToolCallsInterrupted, is_awaitable
from ._cancel import CancelToken
from ._context import ContextBudget, ContextPolicy, ContextUsage
from ._errors import ContextWindowExceededError
from ._events import EventSink
from ._limits import DEADLINE_REASON, UsageLimits
from ._loop_state import NULL_SINK, LoopState
from ._registry import ToolRegistry
from ._runloop import worker_pool
from ._runner import YIELD_EVERY_S, ToolRunner
from ._spec import is_async_callable
from ._types import (
    LLMCaller,
    LLMRequest,
    LLMResponse,
    Message,
    ToolActorContext,
    ToolCall,
    ToolCallRunResult,
)

DEFAULT_MAX_ITERATIONS = 25
SUMMARY_PURPOSE = "summary"
"""``LLMRequest.purpose`` of the call that writes a compaction's summary."""

_perf = time.perf_counter

Resume = Awaitable[LLMResponse] | list[ToolCall]
"""Where the sync driver hands a run over: the model's pending answer, or the calls of
an iteration that cannot run inline."""


class ToolCallingRuntime:
    """Runs the tool-calling loop of one actor: model, registry, runner.

    ``llm_caller`` may be sync or async. In ``arun_tool_loop`` a sync caller runs in a
    worker thread unless it has ``blocking = False`` (like the scripted model). The loop
    speaks tool names as the registry knows them: translating them, and the tool
    schemas, to a provider's wire format is the caller's (an adapter in
    ``cleveragents.llm`` holds its own ``ToolCallRouter``).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        runner: ToolRunner,
        llm_caller: LLMCaller,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        *,
        system_prompt: str | None = None,
        sink: EventSink | None = None,
        pace: Callable[[], Awaitable[None]] | None = None,
        context: ContextPolicy | None = None,
        limits: UsageLimits | None = None,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise TypeError(f"registry must be a ToolRegistry, got {type(registry).__name__}")
        if not isinstance(runner, ToolRunner):
            raise TypeError(f"runner must be a ToolRunner, got {type(runner).__name__}")
        if not callable(llm_caller):
            raise TypeError(f"llm_caller must be callable, got {type(llm_caller).__name__}")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise TypeError("max_iterations must be an int")
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
        self.registry = registry
        self.runner = runner
        self.llm_caller = llm_caller
        self.max_iterations = max_iterations
        self.system_prompt = system_prompt
        self.sink: EventSink = sink or NULL_SINK
        self.pace = pace
        """Awaited before each model call (backpressure: a face whose reader is behind
        holds the run there); the loop then runs on an event loop from its start."""
        if context is not None and not isinstance(context, ContextPolicy):
            raise TypeError(f"context must be a ContextPolicy, got {type(context).__name__}")
        if limits is not None and not isinstance(limits, UsageLimits):
            raise TypeError(f"limits must be a UsageLimits, got {type(limits).__name__}")
        self.context_policy = context if context is not None else ContextPolicy()
        """The context budget (see ``docs/runtime.md``): by default, compaction at 0.8 of
        the model caller's ``context_window`` when it has one."""
        self.limits = limits
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
        # A pace, a context budget or a deadline needs the event loop from the start.
        inline = self.pace is None and state.budget is None and not _deadline(state)
        try:
            resume = self._drive_inline(state) if inline else None
            if resume is not None or not inline:
                session.executor = worker_pool()  # blocking tools: the shared pool
                session.loop.run(self._adrive(state, resume, inline_model=True))
        finally:
            session.close()
            _unlink(state)
        return state.finish()

    def _drive_inline(self, state: LoopState) -> Resume | None:
        """The loop in this thread, until the run ends (``None``) or must wait: then the
        point to resume from on the run's private event loop."""
        session = state.session
        caller = self.llm_caller
        cancel = state.cancel
        while not cancel.cancelled:
            response = caller(state.begin_iteration())
            if hasattr(response, "__await__"):
                return response
            calls = state.take_response(response)
            if calls:
                hook = None if len(calls) == 1 and not state.emit else state.record_hook(calls)
                records = session.run_sync(calls, state.iteration, hook)
                if records is None:
                    return calls
                state.take_records(calls, records)
            if state.end_iteration():
                break
        return None

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
        try:
            await self._adrive(state, None, inline_model=False)
        finally:
            await state.session.aclose()
            _unlink(state)
        return state.finish()

    async def _adrive(self, state: LoopState, resume: Resume | None, *, inline_model: bool) -> None:
        """The loop on an event loop, from its start or from where the sync driver
        stopped. A cancel of the run interrupts the model call or the tool calls."""
        guard = _Interrupter(state.cancel)
        session = state.session
        caller = self.llm_caller
        direct = inline_model or self._caller_is_async or self._caller_inline
        last_turn = _perf()
        timer = _deadline_timer(state)
        try:
            while True:
                calls: list[ToolCall] = []
                try:
                    if isinstance(resume, list):
                        calls = resume
                    else:
                        pending: object = resume
                        if resume is None:
                            if state.cancel.cancelled:
                                break
                            if state.budget is not None:
                                pending = self._budgeted_call(state, direct)
                            else:
                                request = state.begin_iteration()
                                if self.pace is not None:
                                    pending = self._apaced(request, direct)
                                else:
                                    pending = (
                                        caller(request) if direct else self._acall_model(request)
                                    )
                        guard.armed = True
                        if _perf() - last_turn >= YIELD_EVERY_S:
                            await asyncio.sleep(0)
                            last_turn = _perf()
                        response = await pending if is_awaitable(pending) else pending
                        guard.armed = False
                        calls = state.take_response(response)
                    resume = None
                    if calls:
                        guard.armed = True
                        hook = state.record_hook(calls)
                        records = await session.arun_calls(calls, state.iteration, hook)
                        guard.armed = False
                        state.take_records(calls, records)
                except ToolCallsInterrupted as exc:
                    guard.absorb(exc)
                    state.take_records(calls, exc.records)
                    state.end_iteration()
                    break
                except asyncio.CancelledError as exc:
                    guard.absorb(exc)
                    break
                if state.end_iteration():
                    break
        finally:
            guard.close()
            if timer is not None:
                timer.cancel()

    async def _budgeted_call(self, state: LoopState, direct: bool) -> LLMResponse:
        """One model call of a run with a context budget: compact first when the request
        would pass the budget, and once more, harder, when the provider answers that the
        context is too long, then call again (once)."""
        await self._compact(state, hard=False)
        request = state.begin_iteration()
        try:
            return await self._one_call(request, direct)
        except ContextWindowExceededError:
            if not await self._compact(state, hard=True):
                raise
        return await self._one_call(state.begin_iteration(again=True), direct)

    async def _one_call(self, request: LLMRequest, direct: bool) -> LLMResponse:
        if self.pace is not None:
            return await self._apaced(request, direct)
        if not direct:
            return await self._acall_model(request)
        response: object = self.llm_caller(request)
        if is_awaitable(response):
            response = await response
        return response  # type: ignore[return-value]  # checked by take_response

    async def _compact(self, state: LoopState, *, hard: bool) -> bool:
        """Bring the next request within the budget (see ``_context``); whether the
        conversation changed."""
        budget = state.budget
        assert budget is not None
        policy = budget.policy
        messages = state.messages
        tools = self.registry.schemas()
        if policy.processor is not None:
            usage = ContextUsage(
                budget.estimate(messages, tools), budget.window, budget.limit, state.iteration + 1
            )
            new: object = policy.processor(messages, usage)
            if is_awaitable(new):
                new = await new
            if not isinstance(new, list):
                raise TypeError(f"a history processor must return a list, not {type(new).__name__}")
            if new is not messages:
                messages[:] = new
            budget.rewritten()
            return True
        if not hard and state.over_budget() is None:
            return False
        keep = min(1, policy.keep_recent_iterations) if hard else policy.keep_recent_iterations
        changed = False
        step = budget.prune(messages, tools, keep)
        if step is not None:
            state.compacted(step)
            changed = True
        if policy.summarize and (hard or state.over_budget() is not None):
            found = budget.summary_range(messages, state.prompt_message, keep)
            if found is not None:
                chosen, start, kept_iteration = found
                summary = await self._summarise(
                    state, budget.summary_request_text(messages, chosen)
                )
                if summary:
                    state.compacted(
                        budget.apply_summary(
                            messages, tools, state.prompt_message, chosen, start,
                            kept_iteration, summary,
                        )
                    )  # fmt: skip
                    changed = True
        return changed

    async def _summarise(self, state: LoopState, text: str) -> str:
        """Ask the summary model (the run's own by default) to summarise ``text``."""
        budget = state.budget
        assert budget is not None
        model = budget.policy.summary_model or self.llm_caller
        request = LLMRequest(
            [Message("system", budget.policy.summary_prompt), Message("user", text)],
            (), state.iteration + 1, state.context, state.cancel, _no_text,
            purpose=SUMMARY_PURPOSE,
        )  # fmt: skip
        if is_async_callable(model) or getattr(model, "blocking", True) is False:
            response: object = model(request)
            if is_awaitable(response):
                response = await response
        else:
            response = await asyncio.to_thread(model, request)
            if is_awaitable(response):
                response = await response
        if not isinstance(response, LLMResponse):
            raise TypeError(
                f"the LLM caller must return an LLMResponse, got {type(response).__name__}"
            )
        state.model_calls += 1
        if response.usage is not None:
            state.usage = response.usage if state.usage is None else state.usage + response.usage
        return response.content.strip()

    async def _apaced(self, request: LLMRequest, direct: bool) -> LLMResponse:
        """The model call after the face's pace (awaited while the run's cancel guard is
        armed, so a cancel interrupts a run held there)."""
        assert self.pace is not None
        await self.pace()
        if not direct:
            return await self._acall_model(request)
        response: object = self.llm_caller(request)
        if is_awaitable(response):
            response = await response
        return response  # type: ignore[return-value]  # checked by take_response

    async def _acall_model(self, request: LLMRequest) -> LLMResponse:
        """A sync caller that may block: in a worker thread."""
        response = await asyncio.to_thread(self.llm_caller, request)
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
    ) -> LoopState:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        if not prompt.strip():
            raise ValueError("prompt must not be empty")
        limit = self.max_iterations if max_iterations is None else max_iterations
        if limit < 1:
            raise ValueError(f"max_iterations must be at least 1, got {limit}")
        context = context if context is not None else ToolActorContext()
        cancel = cancel if cancel is not None else CancelToken()
        limits = self.limits
        own: CancelToken | None = None
        if limits is not None and limits.deadline_s is not None:
            # The deadline cancels the run's own token, never the caller's: the run ends
            # at its limit, not cancelled.
            own = CancelToken()
            outer = cancel
            unlink = outer.add_callback(lambda: own.cancel(outer.reason or "cancelled"))
            cancel = own
        session = self.runner.session(context, cancel, registry=self.registry)
        state = LoopState(
            self.registry, prompt, context, system_prompt or self.system_prompt,
            history, cancel, sink or self.sink, session, limit, self._budget(), limits,
        )  # fmt: skip
        if own is not None:
            _LINKS[id(state)] = unlink
        return state

    def _budget(self) -> ContextBudget | None:
        """A run's context budget, when the policy is on and the window is known."""
        policy = self.context_policy
        if not policy.enabled:
            return None
        window = policy.window or _positive_int(getattr(self.llm_caller, "context_window", None))
        if window is None and policy.processor is None:
            return None
        reserve = policy.reserve_tokens
        if reserve is None:
            reserve = _positive_int(getattr(self.llm_caller, "max_output_tokens", None)) or 0
        return ContextBudget(policy, window, reserve)


def _nothing() -> None:
    return None


def _no_text(text: str) -> None:
    """A summary's text is not the run's: it is not streamed."""


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


_LINKS: dict[int, Callable[[], None]] = {}
"""Per run with a deadline: the remover of the link from the caller's token to the
run's own."""


def _deadline(state: LoopState) -> bool:
    return state.limits is not None and state.limits.deadline_s is not None


def _unlink(state: LoopState) -> None:
    remove = _LINKS.pop(id(state), None)
    if remove is not None:
        remove()


def _deadline_timer(state: LoopState) -> asyncio.TimerHandle | None:
    """Cancel the run's own token when its deadline (from the run's start) passes."""
    limits = state.limits
    if limits is None or limits.deadline_s is None:
        return None

    def expire() -> None:
        if not state.cancel.cancelled:
            state.limit_reason = "deadline"
            state.cancel.cancel(DEADLINE_REASON)

    left = max(0.0, limits.deadline_s - (_perf() - state.started))
    return asyncio.get_running_loop().call_later(left, expire)


class _Interrupter:
    """Turns the run's cancel (from any thread) into a cancel of the driving task, but
    only while ``armed``: at the awaits of the model and the tools, never in the sink."""

    __slots__ = ("_cancel", "_loop", "_remove", "_task", "armed")

    def __init__(self, cancel: CancelToken) -> None:
        self.armed = False
        self._cancel = cancel
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        self._remove = cancel.add_callback(self._on_cancel)

    def _on_cancel(self) -> None:  # any thread
        self._loop.call_soon_threadsafe(self._interrupt)

    def _interrupt(self) -> None:  # on the loop's thread
        if self.armed and self._task is not None:
            self._task.cancel()

    def absorb(self, exc: BaseException) -> None:
        """Undo the cancel this driver asked for, so the caller's task goes on; a cancel
        from outside (the run was not cancelled) goes on up."""
        self.armed = False
        if not self._cancel.cancelled:
            raise exc
        task = self._task
        if task is not None and task.cancelling():
            task.uncancel()

    def close(self) -> None:
        """Stop listening, and let go of the task: the remover holds this guard (through
        its callback), so a guard kept would keep the task and its result alive until a
        full garbage collection."""
        self.armed = False
        self._remove()
        self._remove = _nothing
        self._task = None
