"""The sync driver of the runner: an iteration's calls run in the calling thread.

``blocking=False`` sync handlers (and unknown tools) run inline; blocking sync handlers
run in the shared pool of worker threads, each under its timeout, the driver waiting
on their futures (a thread wakes a waiting thread faster than it wakes an event loop).
An iteration with an async handler, or a run with an async policy, is not run here:
``run_sync`` answers ``None`` and the caller hands it to the async driver. The stages of
a call are ``CallCore.stages``; this module only says where they run and waits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ._call import CallCore, OnRecord, Resolve, is_awaitable, run_now
from ._runloop import RunLoop, worker_pool
from ._spec import ToolSpec
from ._types import ToolCall, ToolCallRecord

_perf = time.perf_counter

_Pending = dict[concurrent.futures.Future[ToolCallRecord], tuple[int, ToolSpec, float, float]]
"""A call running in the pool: its index, spec, start and deadline."""


class SyncDriver:
    """The sync driver's side of the stages (a ``Driver``), in one thread.

    A rare awaitable (an async hook, a sync handler or policy that returns a coroutine)
    runs to its end on ``resolve`` before the stages go on, so they never suspend: on the
    run's private loop from the calling thread, on a loop of its own in a worker thread.
    Every handler is called where the stages run (the pool was chosen before them, and
    the waiting thread keeps the time). First calls of a tool in several threads share
    one activation, under the core's lock."""

    __slots__ = ("resolve",)

    offload: None = None

    def __init__(self, resolve: Resolve) -> None:
        self.resolve = resolve

    async def activate(self, core: CallCore, spec: ToolSpec) -> None:
        with core.activation_lock:
            if spec.name in core.activated:
                return
            try:
                result = core.run_activation_hook(spec)
                if is_awaitable(result):
                    self.resolve(result)
            except Exception as exc:
                raise core.activation_failed(spec, exc) from exc
            core.activated[spec.name] = spec


def _run_fresh(awaitable: Awaitable[Any]) -> Any:
    """An awaitable met in a worker thread: run on an event loop of its own (rare)."""

    async def settle() -> Any:
        return await awaitable

    return asyncio.run(settle())


IN_WORKER = SyncDriver(_run_fresh)
"""The driver of calls running in the pool's threads."""


class SyncCalls(CallCore):
    """The sync driver's half of a run session (``ToolRunSession`` combines both)."""

    loop: RunLoop
    """The private event loop of a sync run, for a rare awaitable (an async hook)."""
    here: SyncDriver
    """The driver of calls running in the calling thread (it settles on ``loop``)."""

    def run_sync(
        self, calls: Sequence[ToolCall], iteration: int, on_record: OnRecord | None = None
    ) -> list[ToolCallRecord] | None:
        """Run an iteration in this thread (blocking handlers in the pool), or answer
        ``None``, running nothing, when one of its calls is async."""
        if self.async_policy:
            return None
        get = self.registry.get
        if len(calls) == 1:  # the common case: one lookup, no bookkeeping
            call = calls[0]
            started = _perf()
            spec = get(call.name)
            if spec is None:
                record = self.unknown(call, iteration, started)
            elif spec.inline:
                if self.observe is not None:
                    self.observe("discover", spec.name, call.id)
                record = run_now(self.stages(spec, call, iteration, started, self.here))
            else:
                return None if spec.is_async else self._run_pooled(calls, iteration, on_record)
            if on_record is not None:
                on_record(0, record)
            return [record]
        for call in calls:
            spec = get(call.name)
            if spec is not None and not spec.inline:
                return None if spec.is_async else self._run_pooled(calls, iteration, on_record)
        return run_now(self._run_inline(calls, iteration, on_record))

    async def _run_inline(
        self, calls: Sequence[ToolCall], iteration: int, on_record: OnRecord | None
    ) -> list[ToolCallRecord]:
        """Calls that run here and now, one after the other: inline handlers and unknown
        tools. One coroutine for them all (never suspending, stepped once by ``run_now``):
        awaiting each call's stages costs less than stepping each by hand."""
        records = []
        for index, call in enumerate(calls):
            started = _perf()
            # Discovered again as the call starts: an earlier call may change the registry.
            spec = self.discover(call)
            if spec is None:
                record = self.unknown(call, iteration, started)
            else:
                record = await self.stages(spec, call, iteration, started, self.here)
            if on_record is not None:
                on_record(index, record)
            records.append(record)
        return records

    def _run_pooled(
        self, calls: Sequence[ToolCall], iteration: int, on_record: OnRecord | None
    ) -> list[ToolCallRecord]:
        """Blocking calls in the pool, inline ones here, then wait for the pool (no call
        of the iteration is async: ``run_sync`` checked)."""
        records: list[ToolCallRecord | None] = [None] * len(calls)

        def done(index: int, record: ToolCallRecord) -> None:
            records[index] = record
            if on_record is not None:
                on_record(index, record)

        pending: _Pending = {}
        for index, call in enumerate(calls):
            started = _perf()
            spec = self.discover(call)
            if spec is None:
                done(index, self.unknown(call, iteration, started))
            elif spec.inline:
                done(index, run_now(self.stages(spec, call, iteration, started, self.here)))
            else:
                timeout = self.timeout(spec)
                deadline = started + timeout if timeout is not None else float("inf")
                future = worker_pool().submit(
                    run_now, self.stages(spec, call, iteration, started, IN_WORKER)
                )
                pending[future] = (index, spec, started, deadline)
        if pending:
            self._wait(calls, iteration, done, pending)
        filled = [record for record in records if record is not None]
        assert len(filled) == len(calls), "a pooled call without a record"
        return filled

    def _wait(
        self,
        calls: Sequence[ToolCall],
        iteration: int,
        done: Callable[[int, ToolCallRecord], None],
        pending: _Pending,
    ) -> None:
        """Wait for the pooled calls: each record as its call ends, its deadline passes,
        or the run is cancelled (a thread cannot be killed: its result is then dropped).
        A timeout is the deadline passing, whatever the handler raised before it."""
        wake: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def wake_up() -> None:  # any thread
            if not wake.done():
                wake.set_result(None)

        remove = self.cancel.add_callback(wake_up)
        try:
            while pending:
                now = _perf()
                for future, (index, spec, started, deadline) in list(pending.items()):
                    call = calls[index]
                    if self.cancel.cancelled:  # before done(): a call that returned
                        # because its run was cancelled is recorded cancelled
                        done(index, self.cancelled(call, iteration, started))
                    elif future.done():
                        done(index, future.result())
                    elif now >= deadline:
                        error = self.timed_out(spec, deadline - started)
                        done(index, self.failure(spec, call, iteration, started, error))
                    else:
                        continue
                    del pending[future]
                if pending:
                    nearest = min(deadline for _, _, _, deadline in pending.values())
                    waiting: list[concurrent.futures.Future[Any]] = [*pending, wake]
                    concurrent.futures.wait(
                        waiting,
                        timeout=None if nearest == float("inf") else max(nearest - _perf(), 0),
                        return_when=concurrent.futures.FIRST_COMPLETED,
                    )
        finally:
            remove()
