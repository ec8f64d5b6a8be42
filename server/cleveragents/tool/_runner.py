"""``ToolRunner``: the four-stage lifecycle of every tool call, and the per-run session.

1. **discover**: resolve the name in the registry.
2. **activate**: the spec's one-time setup, once per run per tool, reused within the run.
3. **execute**: validate inputs, ask the policy, run the handler under a timeout,
   validate the output.
4. **deactivate**: teardown of every activated tool when the run ends, on success,
   error and cancel alike (``ToolRunSession.close`` / ``aclose``).

Every outcome is a ``ToolCallRecord``: a failed tool is data for the model, never an
exception for the caller. The runner knows no transport and no provider.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias, TypeGuard

from ._cancel import CancelToken
from ._errors import (
    CleverAgentsError,
    ToolActivationError,
    ToolCancelledError,
    ToolError,
    ToolNotFoundError,
    ToolPermissionError,
    ToolTimeoutError,
)
from ._policy import PermissionQuery, ToolPolicy
from ._registry import ToolRegistry
from ._spec import ToolSpec
from ._types import RESERVED_INPUT_KEYS, JSONValue, ToolActorContext, ToolCall, ToolCallRecord

logger = logging.getLogger(__name__)

Stage = Literal["discover", "activate", "execute", "deactivate"]
StageObserver: TypeAlias = Callable[[Stage, str, str], None]
"""Called as ``observer(stage, tool_name, call_id)``; ``call_id`` is ``""`` for deactivate."""

OnRecord: TypeAlias = Callable[[int, ToolCallRecord], None]

OutputFilter: TypeAlias = Callable[[str, str, JSONValue], JSONValue]
"""``(tool_name, call_id, output) -> output``: applied to every successful output before
it is recorded and fed back. It may replace the output (a host caps its size) or raise
to fail the record (a host refuses what its wire cannot carry)."""
"""Called as ``on_record(index, record)`` as soon as a call ends; ``index`` is the call's
place in the model's list."""

CANCELLED_ERROR = "cancelled: the run was cancelled before the tool finished"

_perf = time.perf_counter

_current_call: contextvars.ContextVar[tuple[ToolCall, int] | None] = contextvars.ContextVar(
    "cleveragents_current_call", default=None
)


def current_tool_call() -> tuple[ToolCall, int] | None:
    """The call (and its iteration) the current handler is running for.

    A handler receives only its inputs; a proxy that must name the call on the wire
    (the daemon's ``tools/call``) reads the call id and iteration from here.
    """
    return _current_call.get()


_shared_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _worker_pool() -> concurrent.futures.ThreadPoolExecutor:
    """One process-wide pool for blocking handlers of sync runs, created on first use."""
    global _shared_pool
    with _pool_lock:
        if _shared_pool is None:
            _shared_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=32, thread_name_prefix="cleveragents-tool"
            )
        return _shared_pool


def describe_error(exc: BaseException) -> str:
    """The record text of a failure: our own messages as is, others with their type."""
    if isinstance(exc, CleverAgentsError):
        return exc.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_encode_json = json.JSONEncoder(ensure_ascii=False, default=str).encode


def error_code(exc: BaseException) -> int:
    """The record's ``error_code``: our own class's code, else a generic tool failure."""
    return exc.code if isinstance(exc, CleverAgentsError) else ToolError.code


def output_text(output: JSONValue) -> str:
    """A tool output as the model reads it: strings as is, other JSON serialised."""
    if isinstance(output, str):
        return output
    return _encode_json(output)


def _is_awaitable(value: object) -> TypeGuard[Awaitable[Any]]:
    """``inspect.isawaitable`` without its slow ABC check on plain JSON values."""
    return hasattr(value, "__await__")


_REPORT_CHUNK = 256
"""Cancelled records reported between two yields to the event loop."""


class ToolCallsInterrupted(asyncio.CancelledError):
    """An iteration's calls were cancelled; ``records`` holds one record per call."""

    def __init__(self, records: list[ToolCallRecord]) -> None:
        super().__init__("tool calls cancelled")
        self.records = records


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


class ToolRunSession:
    """The tools of one run: activations made, and the calls' shared machinery."""

    def __init__(
        self,
        runner: ToolRunner,
        registry: ToolRegistry,
        context: ToolActorContext,
        cancel: CancelToken,
    ) -> None:
        self._runner = runner
        self._registry = registry
        self._context = context
        self._cancel = cancel
        self._observe = runner.stage_observer
        self._activated: dict[str, ToolSpec] = {}
        self._activating: dict[str, asyncio.Future[None]] = {}
        self._activation_lock = threading.Lock()
        self._bridge = _AsyncBridge()
        # Reserved inputs, built once per run: the context always wins.
        self._reserved: dict[str, JSONValue] = {
            "sandbox_root": context.sandbox_root,
            "resource_bindings": context.resource_bindings,
        }

    # -- shared pieces -------------------------------------------------------------------

    def _discover(self, call: ToolCall) -> ToolSpec | None:
        spec = self._registry.get(call.name)
        if spec is not None and self._observe is not None:
            self._observe("discover", spec.name, call.id)
        return spec

    def _inputs(self, spec: ToolSpec, call: ToolCall) -> dict[str, JSONValue]:
        """Validate the model's arguments, then add the reserved keys (context wins)."""
        if call.parse_error is not None:
            raise ValueError(f"arguments for {spec.name} are not valid JSON: {call.parse_error}")
        arguments = call.arguments
        if not isinstance(arguments, dict):
            raise ValueError(f"arguments for {spec.name} must be a JSON object")
        if RESERVED_INPUT_KEYS.isdisjoint(arguments):
            spec.validate_input(arguments)
            return {**arguments, **self._reserved}
        model_args = {k: v for k, v in arguments.items() if k not in RESERVED_INPUT_KEYS}
        spec.validate_input(model_args)
        return {**model_args, **self._reserved}

    def _query(
        self, spec: ToolSpec, call: ToolCall, iteration: int, inputs: dict[str, JSONValue]
    ) -> PermissionQuery:
        return PermissionQuery(spec, call.arguments, call.id, iteration, self._context, inputs)

    def _timeout(self, spec: ToolSpec) -> float | None:
        return spec.timeout_s if spec.timeout_s is not None else self._runner.default_timeout_s

    def _finish(
        self, spec: ToolSpec, call: ToolCall, iteration: int, started: float, output: JSONValue
    ) -> ToolCallRecord:
        if spec.output_schema is not None:
            spec.validate_output(output)
        output_filter = self._runner.output_filter
        if output_filter is not None:
            output = output_filter(spec.name, call.id, output)
        return ToolCallRecord(
            spec.name, call.arguments, output, (_perf() - started) * 1000.0, True, None,
            iteration, call.id,
        )  # fmt: skip

    @staticmethod
    def failed(
        call: ToolCall,
        iteration: int,
        started: float,
        error: str,
        name: str | None = None,
        code: int = ToolError.code,
    ) -> ToolCallRecord:
        return ToolCallRecord(
            name or call.name, call.arguments, None, (_perf() - started) * 1000.0, False,
            error, iteration, call.id, code,
        )  # fmt: skip

    def _unknown(self, call: ToolCall, iteration: int, started: float) -> ToolCallRecord:
        return self.failed(
            call, iteration, started, f"unknown tool {call.name!r}", None, ToolNotFoundError.code
        )

    # -- async path ----------------------------------------------------------------------

    async def arun_call(self, call: ToolCall, iteration: int) -> ToolCallRecord:
        """All four stages for one call, on the event loop (blocking work in a thread)."""
        started = _perf()
        spec = self._discover(call)
        if spec is None:
            return self._unknown(call, iteration, started)
        try:
            if spec.on_activate is not None and spec.name not in self._activated:
                await self._aactivate(spec)
            if self._observe is not None:
                self._observe("execute", spec.name, call.id)
            inputs = self._inputs(spec, call)
            _current_call.set((call, iteration))
            policy = self._runner.policy
            if policy is not None:
                refusal = policy.authorize(self._query(spec, call, iteration, inputs))
                if _is_awaitable(refusal):
                    refusal = await refusal
                if refusal is not None:
                    raise ToolPermissionError(str(refusal))
            output = await self._ainvoke(spec, inputs)
            return self._finish(spec, call, iteration, started, output)
        except Exception as exc:  # noqa: BLE001 - the tool-failure boundary: failures become records
            return self.failed(
                call, iteration, started, describe_error(exc), spec.name, error_code(exc)
            )

    async def _ainvoke(self, spec: ToolSpec, inputs: dict[str, JSONValue]) -> JSONValue:
        handler = spec.handler
        if not spec.is_async and not spec.blocking:
            result = handler(inputs)
            return await result if _is_awaitable(result) else result
        timeout = self._timeout(spec)
        if timeout is None:
            if spec.is_async:
                return await handler(inputs)
            result = await asyncio.to_thread(handler, inputs)
            return await result if _is_awaitable(result) else result
        try:
            async with asyncio.timeout(timeout):
                if spec.is_async:
                    return await handler(inputs)
                result = await asyncio.to_thread(handler, inputs)
                return await result if _is_awaitable(result) else result
        except TimeoutError:
            raise ToolTimeoutError(f"tool {spec.name} timed out after {timeout:g} s") from None

    async def _aactivate(self, spec: ToolSpec) -> None:
        pending = self._activating.get(spec.name)
        if pending is not None:  # a concurrent call of the same tool is activating it
            await asyncio.shield(pending)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._activating[spec.name] = future
        try:
            if self._observe is not None:
                self._observe("activate", spec.name, "")
            assert spec.on_activate is not None
            result = spec.on_activate(self._context)
            if _is_awaitable(result):
                await result
            self._activated[spec.name] = spec
            future.set_result(None)
        except BaseException as exc:
            del self._activating[spec.name]
            error = ToolActivationError(
                f"activation of tool {spec.name} failed: {describe_error(exc)}"
            )
            future.set_exception(error)
            future.exception()  # mark retrieved: concurrent waiters re-raise it themselves
            raise error from exc

    async def arun_calls(
        self, calls: Sequence[ToolCall], iteration: int, on_record: OnRecord | None = None
    ) -> list[ToolCallRecord]:
        """Run one iteration's calls concurrently; records in the model's order.

        ``on_record`` sees each record as soon as its call ends (completion order). If
        the awaiting task is cancelled, unfinished calls are cancelled too and
        ``ToolCallsInterrupted`` (a ``CancelledError``) carries every record: finished
        calls keep theirs, the others get a cancelled record.
        """
        started = _perf()
        if len(calls) == 1:
            try:
                record = await self.arun_call(calls[0], iteration)
            except asyncio.CancelledError:
                raise ToolCallsInterrupted(
                    self._cancelled_records(calls, iteration, started, None, on_record)
                ) from None
            if on_record is not None:
                on_record(0, record)
            return [record]
        if on_record is None:
            tasks = [asyncio.ensure_future(self.arun_call(call, iteration)) for call in calls]
        else:
            tasks = [
                asyncio.ensure_future(self._reported(index, call, iteration, on_record))
                for index, call in enumerate(calls)
            ]
        try:
            return list(await asyncio.gather(*tasks))
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            records = []
            for index in range(0, len(calls), _REPORT_CHUNK):
                # Each cancelled record is reported (a notification, a transcript line):
                # for an iteration of thousands of calls, yield to the loop in between.
                end = index + _REPORT_CHUNK
                records += self._cancelled_records(
                    calls[index:end], iteration, started, tasks[index:end], on_record, index
                )
                await asyncio.sleep(0)
            raise ToolCallsInterrupted(records) from None

    async def _reported(
        self, index: int, call: ToolCall, iteration: int, on_record: OnRecord
    ) -> ToolCallRecord:
        record = await self.arun_call(call, iteration)
        on_record(index, record)
        return record

    def _cancelled_records(
        self,
        calls: Sequence[ToolCall],
        iteration: int,
        started: float,
        tasks: Sequence[asyncio.Future[ToolCallRecord]] | None,
        on_record: OnRecord | None,
        first: int = 0,
    ) -> list[ToolCallRecord]:
        """Finished calls keep their (already reported) records; the rest get a
        cancelled record, reported now. ``first`` is the index of ``calls[0]`` in the
        iteration (what ``on_record`` is told)."""
        records = []
        for index, call in enumerate(calls):
            task = tasks[index] if tasks is not None else None
            if task is not None and task.done() and not task.cancelled():
                records.append(task.result())
            else:
                spec = self._registry.get(call.name)
                name = spec.name if spec is not None else None
                record = self.failed(
                    call, iteration, started, CANCELLED_ERROR, name, ToolCancelledError.code
                )
                if on_record is not None:
                    on_record(first + index, record)
                records.append(record)
        return records

    async def aclose(self) -> None:
        """Deactivate every activated tool, whatever happened (logged, never raised)."""
        activated, self._activated = self._activated, {}
        self._activating.clear()
        for spec in activated.values():
            if self._observe is not None:
                self._observe("deactivate", spec.name, "")
            if spec.on_deactivate is None:
                continue
            try:
                result = spec.on_deactivate(self._context)
                if _is_awaitable(result):
                    await result
            except Exception:  # teardown must reach every tool
                logger.exception("deactivation of tool %s failed", spec.name)

    # -- sync path -----------------------------------------------------------------------

    def _execute_sync(
        self, spec: ToolSpec, call: ToolCall, iteration: int, started: float
    ) -> ToolCallRecord:
        """Stages 2-3 in the current thread (inline, or a pool worker)."""
        try:
            if spec.on_activate is not None and spec.name not in self._activated:
                self._activate_sync(spec)
            if self._observe is not None:
                self._observe("execute", spec.name, call.id)
            inputs = self._inputs(spec, call)
            _current_call.set((call, iteration))
            policy = self._runner.policy
            if policy is not None:
                query = self._query(spec, call, iteration, inputs)
                refusal = self._bridge.resolve(policy.authorize(query))
                if refusal is not None:
                    raise ToolPermissionError(str(refusal))
            output = spec.handler(inputs)
            if _is_awaitable(output):
                output = self._bridge.resolve(output)
            return self._finish(spec, call, iteration, started, output)
        except Exception as exc:  # noqa: BLE001 - the tool-failure boundary: failures become records
            return self.failed(
                call, iteration, started, describe_error(exc), spec.name, error_code(exc)
            )

    def _activate_sync(self, spec: ToolSpec) -> None:
        with self._activation_lock:
            if spec.name in self._activated:
                return
            if self._observe is not None:
                self._observe("activate", spec.name, "")
            assert spec.on_activate is not None
            try:
                self._bridge.resolve(spec.on_activate(self._context))
            except Exception as exc:
                raise ToolActivationError(
                    f"activation of tool {spec.name} failed: {describe_error(exc)}"
                ) from exc
            self._activated[spec.name] = spec

    def run_calls(
        self, calls: Sequence[ToolCall], iteration: int, on_record: OnRecord | None = None
    ) -> list[ToolCallRecord]:
        """Run one iteration's calls concurrently (worker threads); records in model order.

        ``blocking=False`` sync handlers run inline. The others run in the shared pool,
        each under its timeout; on cancel, unfinished calls get a cancelled record (a
        thread cannot be killed: it finishes in the background, its result dropped).
        ``on_record`` sees each record as soon as its call ends.
        """
        if len(calls) == 1:  # the common case, without the bookkeeping below
            spec = self._registry.get(calls[0].name)
            if spec is not None and not spec.blocking and not spec.is_async:
                if self._observe is not None:
                    self._observe("discover", spec.name, calls[0].id)
                record = self._execute_sync(spec, calls[0], iteration, _perf())
                if on_record is not None:
                    on_record(0, record)
                return [record]
        records: list[ToolCallRecord | None] = [None] * len(calls)

        def done(index: int, record: ToolCallRecord) -> None:
            records[index] = record
            if on_record is not None:
                on_record(index, record)

        pending: dict[concurrent.futures.Future[ToolCallRecord], tuple[int, float, float]] = {}
        for index, call in enumerate(calls):
            started = _perf()
            spec = self._discover(call)
            if spec is None:
                done(index, self._unknown(call, iteration, started))
            elif not spec.blocking and not spec.is_async:
                done(index, self._execute_sync(spec, call, iteration, started))
            else:
                timeout = self._timeout(spec)
                deadline = started + timeout if timeout is not None else float("inf")
                future = _worker_pool().submit(self._execute_sync, spec, call, iteration, started)
                pending[future] = (index, started, deadline)
        if pending:
            self._wait_sync(calls, iteration, done, pending)
        return records  # type: ignore[return-value]  # every slot is filled

    def _wait_sync(
        self,
        calls: Sequence[ToolCall],
        iteration: int,
        done: Callable[[int, ToolCallRecord], None],
        pending: dict[concurrent.futures.Future[ToolCallRecord], tuple[int, float, float]],
    ) -> None:
        wake: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def wake_up() -> None:
            if not wake.done():
                wake.set_result(None)

        remove = self._cancel.add_callback(wake_up)
        try:
            while pending:
                now = _perf()
                for future, (index, started, deadline) in list(pending.items()):
                    if future.done():
                        done(index, future.result())
                        del pending[future]
                    elif self._cancel.cancelled:
                        done(index, self._cancelled_records(
                            [calls[index]], iteration, started, None, None)[0])  # fmt: skip
                        del pending[future]
                    elif now >= deadline:
                        spec = self._registry.get(calls[index].name)
                        name = spec.name if spec else calls[index].name
                        timeout = deadline - started
                        done(index, self.failed(
                            calls[index], iteration, started,
                            f"tool {name} timed out after {timeout:g} s", name,
                            ToolTimeoutError.code,
                        ))  # fmt: skip
                        del pending[future]
                if not pending:
                    break
                nearest = min(deadline for _, _, deadline in pending.values())
                concurrent.futures.wait(
                    [*pending, wake],
                    timeout=None if nearest == float("inf") else max(nearest - _perf(), 0),
                    return_when=concurrent.futures.FIRST_COMPLETED,
                )
        finally:
            remove()

    def close(self) -> None:
        """Deactivate every activated tool (sync twin of ``aclose``)."""
        activated, self._activated = self._activated, {}
        for spec in activated.values():
            if self._observe is not None:
                self._observe("deactivate", spec.name, "")
            if spec.on_deactivate is None:
                continue
            try:
                self._bridge.resolve(spec.on_deactivate(self._context))
            except Exception:  # teardown must reach every tool
                logger.exception("deactivation of tool %s failed", spec.name)
        self._bridge.close()


class _AsyncBridge:
    """One event loop, in a thread of its own, for the async handlers and hooks of a sync
    run. ``asyncio.run`` per call built and tore down a loop each time (about 300 µs a
    call); this one is made at the run's first awaitable and closed with the run. Each
    awaitable runs in a copy of its caller's context, so ``current_tool_call()`` answers
    as it does under the async driver. Closing cancels what is still running (a call
    that timed out), so no worker thread waits on it for ever."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def resolve(self, value: object) -> object:
        if not _is_awaitable(value):
            return value
        loop = self._running_loop()
        context = contextvars.copy_context()
        done: concurrent.futures.Future[object] = concurrent.futures.Future()

        def start() -> None:
            task = loop.create_task(_await(value), context=context)
            task.add_done_callback(lambda finished: _settle(finished, done))

        loop.call_soon_threadsafe(start)
        return done.result()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="cleveragents-async-tools", daemon=True
                )
                self._thread.start()
            return self._loop

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _settle(task: asyncio.Task[object], done: concurrent.futures.Future[object]) -> None:
    if task.cancelled():
        done.cancel()
    elif task.exception() is not None:
        done.set_exception(task.exception())
    else:
        done.set_result(task.result())


async def _cancel_all() -> None:
    """Cancel the bridge's other tasks and wait for them to end."""
    current = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def _await(value: Awaitable[object]) -> object:
    return await value
