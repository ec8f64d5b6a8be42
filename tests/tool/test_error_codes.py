"""Every failed record carries the code of the error class that failed it, through both
drivers and every kind of handler: clients and tests compare codes, not text."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from toolkit import RecordingSink, calls, cancel_once_started, runtime, spec

from cleveragents.tool import (
    CancelToken,
    PermissionQuery,
    ToolActivationError,
    ToolActorContext,
    ToolCancelledError,
    ToolError,
    ToolInputError,
    ToolNotFoundError,
    ToolOutputError,
    ToolPermissionError,
    ToolTimeoutError,
)

MODES = ["sync", "async"]
KINDS = ["inline", "blocking", "async"]


def run(rt: Any, mode: str, **kw: Any) -> Any:
    if mode == "sync":
        return rt.run_tool_loop("go", **kw)
    return asyncio.run(rt.arun_tool_loop("go", **kw))


def handler_of(kind: str, body: Any) -> dict[str, Any]:
    """A tool whose handler runs ``body(inputs)`` inline, in a worker thread, or awaited."""
    if kind == "async":

        async def handler(inputs: dict[str, Any]) -> Any:
            return body(inputs)

        return {"handler": handler}
    return {"handler": body, "blocking": kind == "blocking"}


class Release(RecordingSink):
    """Lets an abandoned worker thread finish as soon as its record is in (``asyncio.run``
    waits for the threads of its executor)."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__()
        self.event = event

    def on_tool_call(self, record: Any) -> None:
        self.event.set()


def one_record(mode: str, kind: str, body: Any, **kw: Any) -> Any:
    made = handler_of(kind, body)
    tool = spec("t", made.pop("handler"), **made, **kw)
    (record,) = run(runtime([calls(("t", {})), {"content": "x"}], tool), mode).tool_call_history
    return record


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_foreign_exception_is_recorded_with_the_generic_tool_code(mode: str, kind: str) -> None:
    def boom(inputs: dict[str, Any]) -> Any:
        raise RuntimeError("disk on fire")

    record = one_record(mode, kind, boom)
    assert (record.success, record.error_code) == (False, ToolError.code)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_our_own_error_raised_by_a_handler_keeps_its_code(mode: str, kind: str) -> None:
    def refuse(inputs: dict[str, Any]) -> Any:
        raise ToolPermissionError("not here")

    assert one_record(mode, kind, refuse).error_code == ToolPermissionError.code


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_successful_call_has_no_code(mode: str, kind: str) -> None:
    record = one_record(mode, kind, lambda inputs: "ok")
    assert (record.success, record.error_code) == (True, None)


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_tool_has_the_not_found_code(mode: str) -> None:
    (record,) = run(runtime([calls(("nope", {})), {"content": "x"}]), mode).tool_call_history
    assert record.error_code == ToolNotFoundError.code


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_and_bad_output_have_their_codes(mode: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    rt = runtime(
        [calls(("t", {"n": "x"}), ("u", {})), {"content": "x"}],
        spec("t", lambda i: "ok", schema),
        spec("u", lambda i: 5, output_schema={"type": "string"}),
    )
    bad_input, bad_output = run(rt, mode).tool_call_history
    assert bad_input.error_code == ToolInputError.code
    assert bad_output.error_code == ToolOutputError.code


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["blocking", "async"])
def test_a_timed_out_call_has_the_timeout_code(mode: str, kind: str) -> None:
    release = threading.Event()

    def slow(inputs: dict[str, Any]) -> Any:
        release.wait(5)
        return "late"

    async def aslow(inputs: dict[str, Any]) -> Any:
        await asyncio.sleep(5)

    handler = aslow if kind == "async" else slow
    try:
        rt = runtime([calls(("t", {})), {"content": "x"}], spec("t", handler, timeout_s=0.02))
        (record,) = run(rt, mode, sink=Release(release)).tool_call_history
    finally:
        release.set()
    assert (record.success, record.error_code) == (False, ToolTimeoutError.code)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("timeout_s", [30.0, None], ids=["timed", "untimed"])
def test_a_handler_s_own_timeout_error_is_a_failure_not_a_timeout(
    mode: str, kind: str, timeout_s: float | None
) -> None:
    # The handler's own TimeoutError (an upstream it called gave up) long before its 30 s:
    # a timeout is told by the deadline that expired, not by the exception's class.
    def gives_up(inputs: dict[str, Any]) -> Any:
        raise TimeoutError("the upstream gave up")

    record = one_record(mode, kind, gives_up, timeout_s=timeout_s)
    assert (record.success, record.error_code) == (False, ToolError.code)
    assert record.error == "TimeoutError: the upstream gave up"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_our_timeout_error_raised_by_a_handler_keeps_its_code(mode: str, kind: str) -> None:
    def proxied(inputs: dict[str, Any]) -> Any:
        raise ToolTimeoutError("the remote tool timed out")

    record = one_record(mode, kind, proxied, timeout_s=30.0)
    assert (record.error_code, record.error) == (ToolTimeoutError.code, "the remote tool timed out")


@pytest.mark.parametrize("mode", MODES)
def test_a_refusal_and_a_failed_activation_have_their_codes(mode: str) -> None:
    class Deny:
        def authorize(self, query: PermissionQuery) -> str | None:
            return "no" if query.spec.name == "t" else None

    def activate(context: ToolActorContext) -> None:
        raise OSError("no database")

    rt = runtime(
        [calls(("t", {}), ("u", {})), {"content": "x"}],
        spec("t", lambda i: "ok"),
        spec("u", lambda i: "ok", on_activate=activate),
        policy=Deny(),
    )
    refused, unactivated = run(rt, mode).tool_call_history
    assert refused.error_code == ToolPermissionError.code
    assert unactivated.error_code == ToolActivationError.code


@pytest.mark.parametrize("mode", MODES)
def test_a_call_cut_short_by_a_cancel_has_the_cancelled_code(mode: str) -> None:
    token = CancelToken()
    started = threading.Event()
    release = threading.Event()

    def hang(inputs: dict[str, Any]) -> Any:
        started.set()
        release.wait(5)
        return "late"

    rt = runtime([calls(("hang", {})), {"content": "never"}], spec("hang", hang))

    canceller = cancel_once_started(started, token)
    try:
        result = run(rt, mode, cancel=token, sink=Release(release))
    finally:
        release.set()
        canceller.join(5)
    (record,) = result.tool_call_history
    assert result.cancelled
    assert (record.success, record.error_code) == (False, ToolCancelledError.code)
