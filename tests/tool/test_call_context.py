"""A handler of two parameters receives its ``ToolCallContext``: the call's id, tool
name, iteration and arguments, the run's context and cancel token. The arity is read
once, when the spec is built."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from toolkit import calls, cancel_once_started, runtime, spec

from cleveragents.tool import (
    CancelToken,
    ToolActorContext,
    ToolCallContext,
    ToolCancelledError,
    ToolError,
    ToolHandlerError,
    ToolSpec,
)

MODES = ["sync", "async"]


def run(rt: Any, mode: str, **kw: Any) -> Any:
    if mode == "sync":
        return rt.run_tool_loop("go", **kw)
    return asyncio.run(rt.arun_tool_loop("go", **kw))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("blocking", [True, False])
def test_a_sync_handler_of_two_parameters_gets_its_call_context(mode: str, blocking: bool) -> None:
    seen: list[ToolCallContext] = []

    def handler(inputs: dict[str, Any], call: ToolCallContext) -> Any:
        seen.append(call)
        return inputs["sandbox_root"]

    context = ToolActorContext(sandbox_root="/w")
    token = CancelToken()
    turns: list[dict[str, Any]] = [
        {"toolCalls": [{"name": "t", "arguments": {"x": 1}, "id": "c7"}]},
        {"content": "x"},
    ]
    rt = runtime(turns, spec("t", handler, blocking=blocking))
    (record,) = run(rt, mode, context=context, cancel=token).tool_call_history
    assert record.output == "/w"  # the reserved inputs are still threaded in
    (call,) = seen
    assert (call.call_id, call.tool_name, call.iteration, call.arguments) == (
        "c7",
        "t",
        1,
        {"x": 1},
    )
    assert call.context is context
    assert call.cancel is token


@pytest.mark.parametrize("mode", MODES)
def test_an_async_handler_of_two_parameters_gets_its_call_context(mode: str) -> None:
    seen: list[tuple[str, int]] = []

    async def handler(inputs: dict[str, Any], call: ToolCallContext) -> Any:
        await asyncio.sleep(0)
        seen.append((call.call_id, call.iteration))
        return inputs["resource_bindings"]

    context = ToolActorContext(resource_bindings={"db": "main"})
    rt = runtime([calls(("t", {})), calls(("t", {})), {"content": "x"}], spec("t", handler))
    records = run(rt, mode, context=context).tool_call_history
    assert [r.output for r in records] == [{"db": "main"}, {"db": "main"}]
    assert seen == [("call_1_0", 1), ("call_2_0", 2)]


@pytest.mark.parametrize("mode", MODES)
def test_a_handler_of_one_parameter_gets_only_its_inputs(mode: str) -> None:
    def handler(inputs: dict[str, Any], extra: str = "default") -> Any:
        return [sorted(inputs), extra]  # an optional second parameter is left alone

    rt = runtime([calls(("t", {"a": 1})), {"content": "x"}], spec("t", handler))
    (record,) = run(rt, mode).tool_call_history
    assert record.output == [["a", "resource_bindings", "sandbox_root"], "default"]


def test_the_arity_is_read_once_when_the_spec_is_built() -> None:
    def one(inputs: dict[str, Any]) -> Any:
        return None

    def two(inputs: dict[str, Any], call: ToolCallContext) -> Any:
        return None

    assert not spec("one", one).takes_context
    assert spec("two", two).takes_context


@pytest.mark.parametrize(
    "handler",
    [
        lambda inputs, call, extra: None,
        lambda inputs, *, required: None,
    ],
    ids=["three-required", "required-keyword"],
)
def test_a_handler_that_cannot_be_called_is_refused_when_the_spec_is_built(handler: Any) -> None:
    with pytest.raises(ToolHandlerError) as caught:
        ToolSpec("t", "T.", {"type": "object"}, handler)
    assert caught.value.code == ToolError.code
    assert "(inputs) or (inputs, context)" in caught.value.message


def test_a_handler_that_is_not_callable_is_refused_with_the_same_error() -> None:
    with pytest.raises(ToolHandlerError) as caught:
        ToolSpec("t", "T.", {"type": "object"}, "not a function")  # type: ignore[arg-type]
    assert caught.value.code == ToolError.code


@pytest.mark.parametrize("mode", MODES)
def test_a_sync_handler_watching_its_cancel_token_stops_when_the_run_is_cancelled(
    mode: str,
) -> None:
    token = CancelToken()
    started = threading.Event()
    returned = threading.Event()

    def watch(inputs: dict[str, Any], call: ToolCallContext) -> Any:
        started.set()
        while not call.cancel.wait(0.01):  # real work, checking the token in between
            pass
        returned.set()
        return "stopped"

    rt = runtime([calls(("watch", {})), {"content": "never"}], spec("watch", watch))

    canceller = cancel_once_started(started, token)
    try:
        result = run(rt, mode, cancel=token)
    finally:
        token.cancel()  # never leave the handler looping, whatever failed
        canceller.join(5)
    (record,) = result.tool_call_history
    assert result.cancelled
    assert (record.success, record.error_code) == (False, ToolCancelledError.code)
    assert returned.wait(5)  # the handler really returned
