"""The stages of a tool call, written once, and every decision about them.

``CallCore`` holds one run's tool state (the activations made, the reserved inputs, where
blocking handlers run) and decides: which spec a name resolves to, the inputs a handler
receives, what the policy is asked, how an output is checked and filtered, and the record
of every outcome, with its ``error_code``. :meth:`CallCore.stages` is the one sequence of
a call: activate, validate, authorize, call, finish.

The sequence waits only as its :class:`Driver` says, at the points where a call may have
to: a tool's first activation (shared with the run's concurrent calls), an awaitable
answer of the policy or the handler, and a handler that needs a worker thread or a
deadline. The async driver (``_runner.py``) awaits there; the sync driver
(``_runner_sync.py``) runs each awaitable to its end first, so the sequence never
suspends and one step runs it (:func:`run_now`). Neither writes the stages again. This
module knows no transport; the ways its coroutines are stepped by hand are at its end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import logging
import threading
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator, Sequence
from typing import Any, Literal, Protocol, TypeAlias, TypeGuard, TypeVar

from ._cancel import CancelToken
from ._errors import (
    CleverAgentsError,
    ToolActivationError,
    ToolCancelledError,
    ToolError,
    ToolInputError,
    ToolNotFoundError,
    ToolPermissionError,
    ToolTimeoutError,
)
from ._policy import PermissionQuery, ToolPolicy
from ._registry import ToolRegistry
from ._spec import ToolSpec, is_async_callable
from ._types import (
    RESERVED_INPUT_KEYS,
    JSONValue,
    ToolActorContext,
    ToolCall,
    ToolCallRecord,
)

logger = logging.getLogger(__name__)

OnRecord: TypeAlias = Callable[[int, ToolCallRecord], None]
"""Called as ``on_record(index, record)`` as soon as a call ends; ``index`` is the call's
place in the model's list."""

OutputFilter: TypeAlias = Callable[[str, str, JSONValue], JSONValue]
"""``(tool_name, call_id, output) -> output``: applied to every successful output before
it is recorded and fed back. It may replace the output (a host caps its size) or raise
to fail the record (a host refuses what its wire cannot carry)."""

Stage = Literal["discover", "activate", "execute", "deactivate"]
StageObserver: TypeAlias = Callable[[Stage, str, str], None]
"""Called as ``observer(stage, tool_name, call_id)``; ``call_id`` is ``""`` for activate
and deactivate."""

CANCELLED_ERROR = "cancelled: the run was cancelled before the tool finished"

_perf = time.perf_counter

assert {"sandbox_root", "resource_bindings"} == RESERVED_INPUT_KEYS, "see CallCore.inputs"


def describe_error(exc: BaseException) -> str:
    """The record text of a failure: our own messages as is, others with their type."""
    if isinstance(exc, CleverAgentsError):
        return exc.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_code(exc: BaseException) -> int:
    """The record's ``error_code``: our own class's code, else a generic tool failure."""
    return exc.code if isinstance(exc, CleverAgentsError) else ToolError.code


_encode_json = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""How an output is serialised: UTF-8 text as is, anything not JSON as its ``str``."""

_encode_fast: Callable[[object, int], Any] | None
try:
    from _json import encode_basestring, make_encoder
except ImportError:  # no C accelerator (not CPython): the encoder above alone
    _encode_fast = None
else:
    # The C encoder ``_encode_json`` builds on every call (with its Python frames), built
    # once with the same settings. No cycle check (it would need a dict per call): a cycle
    # overflows the recursion limit, and ``_encode_json`` then says what it is.
    _encode_fast = make_encoder(None, str, encode_basestring, None, ": ", ", ", False, False, True)


def output_text(output: JSONValue) -> str:
    """A tool output as the model reads it: strings as is, other JSON serialised."""
    if isinstance(output, str):
        return output
    if _encode_fast is not None:
        try:
            return "".join(_encode_fast(output, 0))
        except RecursionError:  # a cycle, or nesting too deep: the checking encoder's error
            pass
    return _encode_json(output)


def is_awaitable(value: object) -> TypeGuard[Awaitable[Any]]:
    """``inspect.isawaitable`` without its slow ABC check on plain JSON values."""
    return hasattr(value, "__await__")


class ToolCallsInterrupted(asyncio.CancelledError):
    """An iteration's calls were cancelled; ``records`` holds one record per call."""

    def __init__(self, records: list[ToolCallRecord]) -> None:
        super().__init__("tool calls cancelled")
        self.records = records


Offload: TypeAlias = Callable[
    ["CallCore", ToolSpec, dict[str, JSONValue], ToolCall, int], Awaitable[Any]
]
"""``offload(core, spec, inputs, call, iteration)``: the handler's output, from a worker
thread or under the handler's deadline."""

Resolve: TypeAlias = Callable[[Awaitable[Any]], Any]
"""Runs an awaitable to its end, from synchronous code, and returns its result."""


class Driver(Protocol):
    """How a driver meets the points where a call may wait (see :meth:`CallCore.stages`).

    A driver holds no run: the run's state is the core's, so one driver serves many runs
    and a run's session holds no reference cycle through it."""

    @property
    def resolve(self) -> Resolve | None:
        """``None``: the stages await what they wait for (the async driver). Otherwise
        it runs each awaitable to its end first, so the stages never suspend (the sync
        driver, in a thread without a running loop)."""

    @property
    def offload(self) -> Offload | None:
        """How a handler that needs a worker thread (a blocking one) or a timer (a timed
        one) is called; ``None``: every handler is called where the stages run (the
        sync driver, which chose the thread before the stages and keeps the time)."""

    def activate(self, core: CallCore, spec: ToolSpec, /) -> Awaitable[None]:
        """Activate ``spec`` for the run once, sharing that activation with concurrent
        first calls; ``ToolActivationError`` when its hook fails."""


class CallCore:
    """One run's tool state, every decision about its calls, and their stages."""

    def __init__(
        self,
        registry: ToolRegistry,
        context: ToolActorContext,
        cancel: CancelToken,
        *,
        policy: ToolPolicy | None,
        default_timeout_s: float | None,
        observe: StageObserver | None,
        output_filter: OutputFilter | None,
    ) -> None:
        self.registry = registry
        self.context = context
        self.cancel = cancel
        self.policy = policy
        self.async_policy = policy is not None and is_async_callable(policy.authorize)
        self.default_timeout_s = default_timeout_s
        self.observe = observe
        self.output_filter = output_filter
        self.activated: dict[str, ToolSpec] = {}
        self.activation_lock = threading.Lock()
        """Held by the sync driver's threads while one activates a tool."""
        self.activating: dict[str, asyncio.Future[None]] = {}
        """The async driver's activations under way: what a concurrent call waits on."""
        self.executor: concurrent.futures.Executor | None = None
        """Where the async driver runs blocking handlers: the loop's default executor
        (``None``), or the shared pool when the sync driver runs the loop."""
        # Reserved inputs, built once per run: the context always wins.
        self._reserved: dict[str, JSONValue] = {
            "sandbox_root": context.sandbox_root,
            "resource_bindings": context.resource_bindings,
        }

    # -- the stages ----------------------------------------------------------------------

    async def stages(
        self, spec: ToolSpec, call: ToolCall, iteration: int, started: float, driver: Driver
    ) -> ToolCallRecord:
        """Stages 2-3 of a discovered call: activate (once per run), then execute:
        validate the arguments, ask the policy, call the handler, check and filter its
        output. Every failure, at any stage, is the call's record."""
        try:
            if spec.on_activate is not None and spec.name not in self.activated:
                await driver.activate(self, spec)
            inputs = self.inputs(spec, call)
            if self.policy is not None:
                query = PermissionQuery(
                    spec, call.arguments, call.id, iteration, self.context, inputs
                )
                answer = self.policy.authorize(query)
                if is_awaitable(answer):
                    resolve = driver.resolve
                    answer = await answer if resolve is None else resolve(answer)
                if answer is not None:  # None allows the call; anything else is why not
                    raise ToolPermissionError(str(answer))
            offload = driver.offload
            if offload is None or self.direct(spec):
                output = spec.invoke(inputs, call, iteration, self)
            else:
                output = offload(self, spec, inputs, call, iteration)
            if hasattr(output, "__await__"):
                resolve = driver.resolve
                output = await output if resolve is None else resolve(output)
            return self.finish(spec, call, iteration, started, output)
        except Exception as exc:  # noqa: BLE001 - the tool-failure boundary: failures become records
            return self.failure(spec, call, iteration, started, exc)

    def discover(self, call: ToolCall) -> ToolSpec | None:
        spec = self.registry.get(call.name)
        if spec is not None and self.observe is not None:
            self.observe("discover", spec.name, call.id)
        return spec

    def inputs(self, spec: ToolSpec, call: ToolCall) -> dict[str, JSONValue]:
        """Enter the execute stage: validate the model's arguments, then add the
        reserved keys (the context wins over the model)."""
        if self.observe is not None:
            self.observe("execute", spec.name, call.id)
        if call.parse_error is not None:  # it names the tool and says what is wrong
            raise ToolInputError(call.parse_error)
        arguments = call.arguments
        if not isinstance(arguments, dict):
            raise ToolInputError(
                f"the arguments of {spec.name} must be a JSON object, "
                f"not {type(arguments).__name__}"
            )
        # The two reserved keys spelled out (checked below): two lookups, no set operation.
        if "sandbox_root" not in arguments and "resource_bindings" not in arguments:
            spec.validate_input(arguments)
            return {**arguments, **self._reserved}
        model_args = {k: v for k, v in arguments.items() if k not in RESERVED_INPUT_KEYS}
        spec.validate_input(model_args)
        return {**model_args, **self._reserved}

    def timeout(self, spec: ToolSpec) -> float | None:
        return spec.timeout_s if spec.timeout_s is not None else self.default_timeout_s

    def direct(self, spec: ToolSpec) -> bool:
        """Whether the handler may be called where the stages run, on an event loop: it
        needs no thread (an inline or async handler) and no timer (no timeout)."""
        return spec.inline or (
            spec.is_async and spec.timeout_s is None and self.default_timeout_s is None
        )

    @staticmethod
    def timed_out(spec: ToolSpec, timeout: float) -> ToolTimeoutError:
        """The error of a call whose deadline expired (never of a ``TimeoutError`` the
        handler raised itself: a driver tells them apart by the deadline)."""
        return ToolTimeoutError(f"tool {spec.name} timed out after {timeout:g} s")

    # -- records -------------------------------------------------------------------------

    def finish(
        self, spec: ToolSpec, call: ToolCall, iteration: int, started: float, output: JSONValue
    ) -> ToolCallRecord:
        """Validate and filter a handler's output, and record the success."""
        if spec.output_schema is not None:
            spec.validate_output(output)
        output_filter = self.output_filter
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

    def failure(
        self, spec: ToolSpec, call: ToolCall, iteration: int, started: float, exc: BaseException
    ) -> ToolCallRecord:
        """The record of a call its handler, hook, policy or validator failed."""
        return self.failed(
            call, iteration, started, describe_error(exc), spec.name, error_code(exc)
        )

    def unknown(self, call: ToolCall, iteration: int, started: float) -> ToolCallRecord:
        why = self.registry.why_missing(call.name)
        text = f"unknown tool {call.name!r}" if why is None else f"{call.name}: {why}"
        return self.failed(call, iteration, started, text, None, ToolNotFoundError.code)

    def cancelled(self, call: ToolCall, iteration: int, started: float) -> ToolCallRecord:
        spec = self.registry.get(call.name)
        name = spec.name if spec is not None else None
        return self.failed(call, iteration, started, CANCELLED_ERROR, name, ToolCancelledError.code)

    def cancelled_records(
        self,
        calls: Sequence[ToolCall],
        iteration: int,
        started: float,
        finished: Sequence[ToolCallRecord | None],
        on_record: OnRecord | None,
        first: int = 0,
    ) -> list[ToolCallRecord]:
        """Finished calls keep their (already reported) records; the rest (``None`` in
        ``finished``) get a cancelled record, reported now. ``first`` is the index of
        ``calls[0]`` in the iteration (what ``on_record`` is told)."""
        records = []
        for index, call in enumerate(calls):
            record = finished[index]
            if record is None:
                record = self.cancelled(call, iteration, started)
                if on_record is not None:
                    on_record(first + index, record)
            records.append(record)
        return records

    # -- activate and deactivate ---------------------------------------------------------

    def run_activation_hook(self, spec: ToolSpec) -> object:
        """Enter the activate stage: run the hook; its result may be awaitable (the
        driver's ``activate`` settles it and shares it)."""
        if self.observe is not None:
            self.observe("activate", spec.name, "")
        assert spec.on_activate is not None
        return spec.on_activate(self.context)

    @staticmethod
    def activation_failed(spec: ToolSpec, exc: BaseException) -> ToolActivationError:
        return ToolActivationError(f"activation of tool {spec.name} failed: {describe_error(exc)}")

    def teardown(self) -> Iterator[tuple[ToolSpec, Awaitable[object]]]:
        """Deactivate every activated tool, whatever happened; yields the hooks that
        answered with an awaitable, for the driver to settle. Failures are logged."""
        activated, self.activated = self.activated, {}
        for spec in activated.values():
            if self.observe is not None:
                self.observe("deactivate", spec.name, "")
            if spec.on_deactivate is None:
                continue
            try:
                result = spec.on_deactivate(self.context)
            except Exception:  # noqa: BLE001 - teardown must reach every tool (logged)
                self.teardown_failed(spec)
                continue
            if is_awaitable(result):
                yield spec, result

    @staticmethod
    def teardown_failed(spec: ToolSpec) -> None:
        logger.exception("deactivation of tool %s failed", spec.name)


# -- coroutines stepped by hand ----------------------------------------------------------
#
# Two places step a coroutine themselves instead of awaiting it, and both are here:
#
# * the sync driver runs ``CallCore.stages`` without an event loop (``run_now``): its
#   driver settles every awaitable before the stages await it, so one step ends them;
# * the async driver starts each call of an iteration in the awaiting task (``arun_calls``
#   takes the first step itself), for speed: a call that ends without suspending costs
#   no task and no turn of the loop. Only a call that suspends goes on, through
#   ``resume``, in that same task.

T = TypeVar("T")


def run_now(steps: Coroutine[Any, Any, T]) -> T:
    """The result of ``steps``, a coroutine that never suspends (the stages under the sync
    driver): one step runs it to its end."""
    try:
        steps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    steps.close()
    raise RuntimeError("a call of the sync driver suspended")  # a driver that did not settle


def first_step(steps: Coroutine[Any, Any, T], context: contextvars.Context) -> tuple[bool, Any]:
    """Step ``steps`` once in ``context``: ``(True, result)`` if it ended, else ``(False,
    what it suspended on)`` for :func:`resume`."""
    try:
        return False, context.run(steps.send, None)
    except StopIteration as done:
        return True, done.value


@types.coroutine
def resume(
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
                result: T = done.value
                return result
        else:
            try:
                suspended_on = run(coro.send, sent)
            except StopIteration as done:
                result = done.value
                return result
