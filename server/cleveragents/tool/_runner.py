"""``ToolRunner``: the four-stage lifecycle of every tool call, and the per-run session.

1. **discover**: resolve the name in the registry.
2. **activate**: the spec's one-time setup, once per run per tool, reused within the run.
3. **execute**: validate inputs, ask the policy, run the handler under a timeout,
   validate the output.
4. **deactivate**: teardown of every activated tool when the run ends, on success,
   error and cancel alike (``ToolRunSession.close`` / ``aclose``).

Every decision lives once, in ``CallCore`` (``_call.py``); the drivers only call out.
The async driver (here) awaits, a sync ``blocking`` handler in a worker thread, under
its timeout. The sync driver (``_runner_sync.py``) runs sync calls from the calling
thread and hands an iteration with an async handler to the async driver, on the run's
private event loop (``_runloop.py``). Every outcome is a ``ToolCallRecord``: a failed
tool is data for the model, never an exception for the caller. The runner knows no
transport and no provider.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import time
import types
from collections.abc import Awaitable, Coroutine, Generator, Sequence
from typing import Any, TypeVar

from ._call import (
    CANCELLED_ERROR,
    OnRecord,
    OutputFilter,
    Stage,
    StageObserver,
    ToolCallsInterrupted,
    describe_error,
    error_code,
    is_awaitable,
    output_text,
)
from ._cancel import CancelToken
from ._policy import ToolPolicy
from ._registry import ToolRegistry
from ._runloop import RunLoop, worker_pool
from ._runner_sync import SyncCalls
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

T = TypeVar("T")

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
        self._activating: dict[str, asyncio.Future[None]] = {}
        self.loop = RunLoop()
        """The private event loop of a sync run (made only if the run awaits)."""
        self.executor: concurrent.futures.Executor | None = None
        """Where blocking handlers run: the loop's default executor (``None``), or the
        shared pool when the sync driver runs the loop."""

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
            try:
                if spec.on_activate is not None and spec.name not in self.activated:
                    await self._aactivate(spec)
                inputs = self.inputs(spec, call)
                if self.policy is not None:
                    pending = self.authorize(spec, call, iteration, inputs)
                    if pending is not None:
                        self.refuse(await pending)
                if spec.inline or (
                    spec.is_async and spec.timeout_s is None and self.default_timeout_s is None
                ):  # no timer, no thread: call it here
                    if spec.takes_context:
                        output = spec.handler(inputs, self.call_context(spec, call, iteration))  # type: ignore[call-arg]
                    else:
                        output = spec.handler(inputs)  # type: ignore[call-arg]
                    if hasattr(output, "__await__"):
                        output = await output
                else:  # a timer, a worker thread, or both
                    output = await self._ainvoke(spec, call, iteration, inputs)
                record = self.finish(spec, call, iteration, started, output)
            except Exception as exc:  # noqa: BLE001 - the tool-failure boundary: failures become records
                record = self.failure(spec, call, iteration, started, exc)
        if on_record is not None:
            on_record(index, record)
        return record

    async def _ainvoke(
        self, spec: ToolSpec, call: ToolCall, iteration: int, inputs: dict[str, JSONValue]
    ) -> Any:
        timeout = self.timeout(spec)
        if timeout is None:
            return await self._acall(spec, call, iteration, inputs)
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await self._acall(spec, call, iteration, inputs)
        except TimeoutError:
            if deadline.expired():
                raise self.timed_out(spec, timeout) from None
            raise  # the handler's own TimeoutError: a failure like any other

    async def _acall(
        self, spec: ToolSpec, call: ToolCall, iteration: int, inputs: dict[str, JSONValue]
    ) -> Any:
        if spec.is_async:
            return await self.call_handler(spec, call, iteration, inputs)  # type: ignore[misc]
        # A blocking sync handler: in a worker thread, in a copy of the caller's context
        # (as ``asyncio.to_thread``), on the executor of the run's kind.
        work = functools.partial(
            contextvars.copy_context().run, self.call_handler, spec, call, iteration, inputs
        )
        result = await asyncio.get_running_loop().run_in_executor(self.executor, work)
        return await result if is_awaitable(result) else result

    async def _aactivate(self, spec: ToolSpec) -> None:
        pending = self._activating.get(spec.name)
        if pending is not None:  # a concurrent call of the same tool is activating it
            await asyncio.shield(pending)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._activating[spec.name] = future
        try:
            result = self.activate(spec)
            if is_awaitable(result):
                await result
        except BaseException as exc:
            del self._activating[spec.name]
            error = self.activation_failed(spec, exc)
            future.set_exception(error)
            future.exception()  # mark retrieved: concurrent waiters re-raise it themselves
            raise error from exc
        self.activated[spec.name] = spec
        future.set_result(None)

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
                try:
                    suspended_on = context.run(coro.send, None)
                except StopIteration as done:
                    records.append(done.value)
                    continue
                first_task = index + 1
                create_task = asyncio.get_running_loop().create_task
                tasks = [
                    create_task(self.arun_call(later, iteration, number, on_record))
                    for number, later in enumerate(calls[first_task:], first_task)
                ]
                records.append(await _resume(coro, suspended_on, context))
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
        self._activating.clear()
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


@types.coroutine
def _resume(
    coro: Coroutine[Any, Any, T], suspended_on: object, context: contextvars.Context
) -> Generator[Any, Any, T]:
    """Await the rest of ``coro``, which was stepped by hand and suspended on
    ``suspended_on``: what ``await coro`` would have done from there (PEP 380), in the
    call's ``context``."""
    run = context.run
    while True:
        try:
            sent = yield suspended_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the coroutine, as await does
            try:
                suspended_on = run(coro.throw, exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                suspended_on = run(coro.send, sent)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
