"""The sync driver of the runner: an iteration's calls run in the calling thread.

``blocking=False`` sync handlers (and unknown tools) run inline; blocking sync handlers
run in the shared pool of worker threads, each under its timeout, the driver waiting
on their futures (a thread wakes a waiting thread faster than it wakes an event loop).
An iteration with an async handler, or a run with an async policy, is not run here:
``run_sync`` answers ``None`` and the caller hands it to the async driver. Every
decision is ``CallCore``'s; this module only calls and waits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ._call import CallCore, OnRecord, is_awaitable
from ._runloop import RunLoop, worker_pool
from ._spec import ToolSpec
from ._types import ToolCall, ToolCallRecord

_perf = time.perf_counter

_Pending = dict[concurrent.futures.Future[ToolCallRecord], tuple[int, ToolSpec, float, float]]
"""A call running in the pool: its index, spec, start and deadline."""


class SyncCalls(CallCore):
    """The sync driver's half of a run session (``ToolRunSession`` combines both)."""

    loop: RunLoop
    """The private event loop of a sync run, for a rare awaitable (an async hook)."""

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
                record = self._run_here(spec, call, iteration, started)
            else:
                return None if spec.is_async else self._run_pooled(calls, iteration, on_record)
            if on_record is not None:
                on_record(0, record)
            return [record]
        for call in calls:
            spec = get(call.name)
            if spec is not None and not spec.inline:
                return None if spec.is_async else self._run_pooled(calls, iteration, on_record)
        records = []
        for index, call in enumerate(calls):
            # Discovered again as the call starts: an earlier call may change the registry.
            record = self._run_inline(get(call.name), call, iteration)
            if on_record is not None:
                on_record(index, record)
            records.append(record)
        return records

    def _run_inline(self, spec: ToolSpec | None, call: ToolCall, iteration: int) -> ToolCallRecord:
        """A call that runs here and now: an inline handler, or an unknown tool."""
        started = _perf()
        if spec is None:
            return self.unknown(call, iteration, started)
        if self.observe is not None:
            self.observe("discover", spec.name, call.id)
        return self._run_here(spec, call, iteration, started)

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
                done(index, self._run_here(spec, call, iteration, started))
            else:
                timeout = self.timeout(spec)
                deadline = started + timeout if timeout is not None else float("inf")
                future = worker_pool().submit(
                    self._run_here, spec, call, iteration, started, _run_fresh
                )
                pending[future] = (index, spec, started, deadline)
        if pending:
            self._wait(calls, iteration, done, pending)
        return records  # type: ignore[return-value]  # every slot is filled

    def _run_here(
        self,
        spec: ToolSpec,
        call: ToolCall,
        iteration: int,
        started: float,
        resolve: Callable[[Awaitable[Any]], Any] | None = None,
    ) -> ToolCallRecord:
        """Stages 2-3 of a sync call in this thread (the driver's, or a worker's); a rare
        awaitable (an async hook, a sync handler that returns a coroutine) goes to
        ``resolve`` (a worker's own loop), by default the run's loop."""
        try:
            if spec.on_activate is not None and spec.name not in self.activated:
                self._activate(spec, resolve or self.loop.run)
            inputs = self.inputs(spec, call)
            if self.policy is not None:
                pending = self.authorize(spec, call, iteration, inputs)
                if pending is not None:
                    self.refuse((resolve or self.loop.run)(pending))
            if spec.takes_context:
                output = spec.handler(inputs, self.call_context(spec, call, iteration))  # type: ignore[call-arg]
            else:
                output = spec.handler(inputs)  # type: ignore[call-arg]
            if hasattr(output, "__await__"):
                output = (resolve or self.loop.run)(output)
            return self.finish(spec, call, iteration, started, output)
        except Exception as exc:  # noqa: BLE001 - the tool-failure boundary: failures become records
            return self.failure(spec, call, iteration, started, exc)

    def _activate(self, spec: ToolSpec, resolve: Callable[[Awaitable[Any]], Any]) -> None:
        with self.activation_lock:  # concurrent first calls share one activation
            if spec.name in self.activated:
                return
            try:
                result = self.activate(spec)
                if is_awaitable(result):
                    resolve(result)
            except Exception as exc:
                raise self.activation_failed(spec, exc) from exc
            self.activated[spec.name] = spec

    def _wait(
        self,
        calls: Sequence[ToolCall],
        iteration: int,
        done: Callable[[int, ToolCallRecord], None],
        pending: _Pending,
    ) -> None:
        """Wait for the pooled calls: each record as its call ends, times out, or the
        run is cancelled (a thread cannot be killed: its result is then dropped)."""
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


def _run_fresh(awaitable: Awaitable[Any]) -> Any:
    """An awaitable met in a worker thread: run on an event loop of its own (rare)."""

    async def settle() -> Any:
        return await awaitable

    return asyncio.run(settle())
