"""``ToolRunner``: the four-stage lifecycle of every tool call, and the per-run session.

1. **discover**: resolve the name in the registry.
2. **activate**: the spec's one-time setup, once per run per tool, reused within the run.
3. **execute**: validate inputs, ask the policy, run the handler under a timeout,
   validate the output.
4. **deactivate**: teardown of every activated tool when the run ends, on success,
   error and cancel alike (``ToolRunSession.close`` / ``aclose``).

Stages 2-3 are written once, ``CallCore.stages`` (``_call.py``); the drivers say where
they run. The async driver (here) runs them on the event loop, a sync ``blocking``
handler in a worker thread and a timed one under its deadline (``AsyncDriver``). The
sync driver (``_runner_sync.py``) runs sync calls from the calling thread and hands an
iteration with an async handler to the async driver, on the run's private event loop
(``_runloop.py``). Every outcome is a ``ToolCallRecord``: a failed tool is data for the
model, never an exception for the caller. The runner knows no transport and no provider.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Awaitable, Sequence
from typing import Any

from ._call import (
    CANCELLED_ERROR,
    CallCore,
    Offload,
    OnRecord,
    OutputFilter,
    Stage,
    StageObserver,
    ToolCallsInterrupted,
    describe_error,
    error_code,
    first_step,
    is_awaitable,
    output_text,
    resume,
)
from ._cancel import CancelToken
from ._policy import ToolPolicy
from ._registry import ToolRegistry
from ._runloop import RunLoop, worker_pool
from ._runner_sync import SyncCalls, SyncDriver
from ._spec import ToolSpec
from ._types import JSONValue, ToolActorContext, ToolCall, ToolCallRecord

__all__ = [
    "CANCELLED_ERROR",
    "OnRecord",
    "OutputFilter",
    "Stage",
    "StageObserver",
    "ToolCallsInterrupted",
    "ToolRunSession",
    "ToolRunner",
    "describe_error",
    "error_code",
    "output_text",
]

_perf = time.perf_counter

YIELD_EVERY_S = 0.002
"""The async drivers give the event loop a turn at least this often. A model and tools
that answer without suspending (the scripted model, inline tools) would otherwise hold
the loop for a whole run, or an iteration of a thousand calls: no cancel could land,
no request be answered, and other runs would wait."""

_REPORT_CHUNK = 256
"""Cancelled records reported between two yields to the event loop."""


class ToolRunner:
    """Runs tool calls through the four stages against a registry.

    ``default_timeout_s`` applies to specs without their own timeout (``None``: no
    limit, so a call pays for a timer only when one is asked for). ``policy`` is
    consulted in the execute stage (the automation profile hook).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        policy: ToolPolicy | None = None,
        default_timeout_s: float | None = None,
        stage_observer: StageObserver | None = None,
        output_filter: OutputFilter | None = None,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise TypeError(f"registry must be a ToolRegistry, got {type(registry).__name__}")
        self.registry = registry
        self.policy = policy
        self.default_timeout_s = default_timeout_s
        self.stage_observer = stage_observer
        self.output_filter = output_filter

    def session(
        self,
        context: ToolActorContext,
        cancel: CancelToken | None = None,
        *,
        registry: ToolRegistry | None = None,
    ) -> ToolRunSession:
        """Open the per-run state (activations) that ``close``/``aclose`` tears down."""
        return ToolRunSession(self, registry or self.registry, context, cancel or CancelToken())

    def run(self, call: ToolCall, context: ToolActorContext | None = None) -> ToolCallRecord:
        """Run one call through all four stages, outside any loop (a convenience)."""
        session = self.session(context or ToolActorContext())
        try:
            return session.run_calls([call], iteration=0)[0]
        finally:
            session.close()

    async def arun(self, call: ToolCall, context: ToolActorContext | None = None) -> ToolCallRecord:
        session = self.session(context or ToolActorContext())
        try:
            return (await session.arun_calls([call], iteration=0))[0]
        finally:
            await session.aclose()


class ToolRunSession(SyncCalls):
    """The tools of one run: ``CallCore``'s state, the sync driver (``SyncCalls``) and
    the async driver (below)."""

    def __init__(
        self,
        runner: ToolRunner,
        registry: ToolRegistry,
        context: ToolActorContext,
        cancel: CancelToken,
    ) -> None:
        super().__init__(
            registry, context, cancel,
            policy=runner.policy, default_timeout_s=runner.default_timeout_s,
            observe=runner.stage_observer, output_filter=runner.output_filter,
        )  # fmt: skip
        self.loop = RunLoop()
        """The private event loop of a sync run (made only if the run awaits)."""
        self.here = SyncDriver(self.loop.run)

    # -- async driver --------------------------------------------------------------------

    async def arun_call(
        self, call: ToolCall, iteration: int, index: int = 0, on_record: OnRecord | None = None
    ) -> ToolCallRecord:
        """All four stages for one call, on the event loop (blocking work in a thread);
        the record goes to ``on_record`` (as the call's ``index``) as soon as it is made."""
        started = _perf()
        spec = self.discover(call)
        if spec is None:
            record = self.unknown(call, iteration, started)
        else:
            record = await self.stages(spec, call, iteration, started, ON_LOOP)
        if on_record is not None:
            on_record(index, record)
        return record

    async def arun_calls(
        self, calls: Sequence[ToolCall], iteration: int, on_record: OnRecord | None = None
    ) -> list[ToolCallRecord]:
        """Run one iteration's calls concurrently; records in the model's order.

        Calls start in the model's order, here, each in a copy of the context as a task
        would be: a call that ends without suspending costs no task and no turn of the
        loop. At the first call that suspends, the calls after it start in tasks of
        their own, and that call goes on in this task, where it started (so a timeout
        or cancel scope it entered stays in its task). ``on_record`` sees each record
        as soon as its call ends (completion order). If the awaiting task is cancelled,
        unfinished calls are cancelled too and ``ToolCallsInterrupted`` (a
        ``CancelledError``) carries every record: finished calls keep theirs, the
        others get a cancelled record.
        """
        started = _perf()
        records: list[ToolCallRecord] = []
        tasks: list[asyncio.Task[ToolCallRecord]] = []
        first_task = len(calls)  # the index of the call tasks[0] runs
        try:
            if len(calls) == 1:
                records.append(await self.arun_call(calls[0], iteration, 0, on_record))
                return records
            last_turn = started
            for index, call in enumerate(calls):
                if _perf() - last_turn >= YIELD_EVERY_S:
                    await asyncio.sleep(0)  # a cancel may land here: the rest get none
                    last_turn = _perf()
                coro = self.arun_call(call, iteration, index, on_record)
                context = contextvars.copy_context()
                ended, step = first_step(coro, context)
                if ended:
                    records.append(step)
                    continue
                first_task = index + 1
                create_task = asyncio.get_running_loop().create_task
                tasks = [
                    create_task(self.arun_call(later, iteration, number, on_record))
                    for number, later in enumerate(calls[first_task:], first_task)
                ]
                records.append(await resume(coro, step, context))
                for task in tasks:
                    records.append(await task)
                break
        except asyncio.CancelledError:
            interrupted = await self._interrupted(
                calls, iteration, started, records, first_task, tasks, on_record
            )
            raise ToolCallsInterrupted(interrupted) from None
        return records

    async def _interrupted(
        self,
        calls: Sequence[ToolCall],
        iteration: int,
        started: float,
        records: list[ToolCallRecord],
        first_task: int,
        tasks: Sequence[asyncio.Task[ToolCallRecord]],
        on_record: OnRecord | None,
    ) -> list[ToolCallRecord]:
        """Cancel the unfinished calls and give every call its record. ``records`` holds
        the records awaited so far (in order); ``tasks`` run the calls from
        ``first_task`` on; a call between them was running in the awaiting task, and
        calls after it without a task had not started."""
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        finished: list[ToolCallRecord | None] = [*records]
        finished += [None] * (first_task - len(finished))
        for task in tasks[len(finished) - first_task :]:
            finished.append(task.result() if task.done() and not task.cancelled() else None)
        interrupted: list[ToolCallRecord] = []
        for index in range(0, len(calls), _REPORT_CHUNK):
            # Each cancelled record is reported (a notification, a transcript line): for
            # an iteration of thousands of calls, yield to the loop in between.
            if index:
                await asyncio.sleep(0)
            end = index + _REPORT_CHUNK
            interrupted += self.cancelled_records(
                calls[index:end], iteration, started, finished[index:end], on_record, index
            )
        return interrupted

    async def aclose(self) -> None:
        """Deactivate every activated tool, whatever happened (logged, never raised)."""
        self.activating.clear()
        for spec, pending in self.teardown():
            try:
                await pending
            except Exception:  # noqa: BLE001 - teardown must reach every tool (logged)
                self.teardown_failed(spec)

    # -- sync entry points (the sync driver itself is ``SyncCalls``) -----------------

    def run_calls(
        self, calls: Sequence[ToolCall], iteration: int, on_record: OnRecord | None = None
    ) -> list[ToolCallRecord]:
        """Run one iteration's calls from this thread; records in the model's order.

        Sync calls run here (blocking handlers in the shared pool of worker threads,
        each under its timeout); an iteration with an async handler runs on the run's
        private loop. A cancel of the run gives unfinished calls a cancelled record (a
        thread cannot be killed: it finishes in the background, its result dropped).
        ``on_record`` sees each record as soon as its call ends.
        """
        records = self.run_sync(calls, iteration, on_record)
        if records is not None:
            return records
        self.executor = worker_pool()
        return self.loop.run(self._until_cancelled(self.arun_calls(calls, iteration, on_record)))

    async def _until_cancelled(self, work: Awaitable[list[ToolCallRecord]]) -> list[ToolCallRecord]:
        """``work``, interrupted when the run's token is cancelled (from any thread)."""
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        assert task is not None

        def interrupt() -> None:  # any thread
            loop.call_soon_threadsafe(task.cancel)

        remove = self.cancel.add_callback(interrupt)
        try:
            return await work
        except ToolCallsInterrupted as exc:
            if task.cancelling():
                task.uncancel()
            return exc.records
        finally:
            remove()

    def close(self) -> None:
        """Deactivate every activated tool (sync twin of ``aclose``), then close the
        run's private loop, cancelling what still runs on it."""
        try:
            for spec, pending in self.teardown():
                try:
                    self.loop.run(pending)
                except Exception:  # noqa: BLE001 - teardown must reach every tool (logged)
                    self.teardown_failed(spec)
        finally:
            self.loop.close()


class AsyncDriver:
    """The async driver's side of the stages (a ``Driver``), on the event loop.

    The stages await where the call stands. A handler that needs a worker thread or a
    deadline goes to :func:`_offload`; the others are called where the stages run.
    First calls of a tool in several tasks share one activation (a future the later
    ones wait on)."""

    __slots__ = ("offload",)

    resolve: None = None

    def __init__(self) -> None:
        self.offload: Offload = _offload

    async def activate(self, core: CallCore, spec: ToolSpec) -> None:
        pending = core.activating.get(spec.name)
        if pending is not None:  # a concurrent call of the same tool is activating it
            await asyncio.shield(pending)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        core.activating[spec.name] = future
        try:
            result = core.run_activation_hook(spec)
            if is_awaitable(result):
                await result
        except BaseException as exc:
            del core.activating[spec.name]
            error = core.activation_failed(spec, exc)
            future.set_exception(error)
            future.exception()  # mark retrieved: concurrent waiters re-raise it themselves
            raise error from exc
        core.activated[spec.name] = spec
        future.set_result(None)


async def _offload(
    core: CallCore, spec: ToolSpec, inputs: dict[str, JSONValue], call: ToolCall, iteration: int
) -> Any:
    """A handler under its timeout, if it has one. A ``TimeoutError`` is a timeout only
    when the deadline is what expired; the handler's own passes on as its failure."""
    timeout = core.timeout(spec)
    if timeout is None:
        return await _elsewhere(core, spec, inputs, call, iteration)
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await _elsewhere(core, spec, inputs, call, iteration)
    except TimeoutError:
        if deadline.expired():
            raise core.timed_out(spec, timeout) from None
        raise


async def _elsewhere(
    core: CallCore, spec: ToolSpec, inputs: dict[str, JSONValue], call: ToolCall, iteration: int
) -> Any:
    """An async handler awaited here; a sync one in a worker thread, in a copy of the
    caller's context (as ``asyncio.to_thread``), on the executor of the run's kind."""
    if spec.is_async:
        output = spec.invoke(inputs, call, iteration, core)
    else:
        work = functools.partial(
            contextvars.copy_context().run, spec.invoke, inputs, call, iteration, core
        )
        output = await asyncio.get_running_loop().run_in_executor(core.executor, work)
    return await output if is_awaitable(output) else output


ON_LOOP = AsyncDriver()
