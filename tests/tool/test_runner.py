"""ToolRunner's four stages: order, activation reuse, deactivation on every ending."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from toolkit import calls, runtime, spec

from cleveragents.tool import (
    CancelToken,
    PermissionQuery,
    ToolActorContext,
    ToolCall,
    ToolInputError,
    ToolRegistry,
    ToolRunner,
    output_text,
)
from cleveragents.tool._stream import CallDraft

MODES = ["sync", "async"]


def lifecycle(log: list[str], name: str, handler: Any = None, **kw: Any) -> Any:
    def activate(context: ToolActorContext) -> None:
        log.append(f"activate:{name}")

    def deactivate(context: ToolActorContext) -> None:
        log.append(f"deactivate:{name}")

    def run(inputs: dict[str, Any]) -> Any:
        log.append(f"run:{name}")
        return "ok"

    return spec(name, handler or run, on_activate=activate, on_deactivate=deactivate, **kw)


def observer(log: list[str]) -> Any:
    return lambda stage, tool, call_id: log.append(f"{stage}:{tool}")


def drive(rt: Any, mode: str, **kw: Any) -> Any:
    if mode == "sync":
        return rt.run_tool_loop("go", **kw)
    return asyncio.run(rt.arun_tool_loop("go", **kw))


@pytest.mark.parametrize("mode", MODES)
def test_stages_run_in_order_and_activation_is_reused_within_a_run(mode: str) -> None:
    log: list[str] = []
    rt = runtime([calls(("t", {})), calls(("t", {})), {"content": "x"}],
                 lifecycle(log, "t"), stage_observer=observer(log))  # fmt: skip
    drive(rt, mode)
    assert log == [
        "discover:t", "activate:t", "activate:t", "execute:t", "run:t",
        "discover:t", "execute:t", "run:t",
        "deactivate:t", "deactivate:t",
    ]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_deactivate_runs_when_a_handler_raises(mode: str) -> None:
    log: list[str] = []

    def boom(inputs: dict[str, Any]) -> Any:
        raise ValueError("bad")

    rt = runtime([calls(("t", {})), {"content": "x"}], lifecycle(log, "t", boom))
    result = drive(rt, mode)
    assert not result.tool_call_history[0].success
    assert log == ["activate:t", "deactivate:t"]


@pytest.mark.parametrize("mode", MODES)
def test_deactivate_runs_when_the_model_fails(mode: str) -> None:
    log: list[str] = []
    turns = iter([{"toolCalls": [{"name": "t", "arguments": {}}]}])

    def model(request: Any) -> Any:
        from cleveragents.tool import LLMResponse

        turn = next(turns, None)
        if turn is None:
            raise ConnectionError("provider down")
        return LLMResponse("", [ToolCall("c", "t", {})])

    registry = ToolRegistry()
    registry.register(lifecycle(log, "t"))
    from cleveragents.tool import ToolCallingRuntime

    rt = ToolCallingRuntime(registry, ToolRunner(registry), model)
    with pytest.raises(ConnectionError):
        drive(rt, mode)
    assert log == ["activate:t", "run:t", "deactivate:t"]


async def test_deactivate_runs_when_the_run_is_cancelled() -> None:
    log: list[str] = []
    token = CancelToken()
    entered = asyncio.Event()

    async def hang(inputs: dict[str, Any]) -> Any:
        entered.set()
        await asyncio.sleep(30)

    rt = runtime([calls(("t", {})), {"content": "x"}], lifecycle(log, "t", hang))
    task = asyncio.create_task(rt.arun_tool_loop("go", cancel=token))
    async with asyncio.timeout(5):
        await entered.wait()
    token.cancel()
    async with asyncio.timeout(5):
        result = await task
    assert result.cancelled
    assert log == ["activate:t", "deactivate:t"]


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_activation_fails_the_call_with_a_clear_error(mode: str) -> None:
    def activate(context: ToolActorContext) -> None:
        raise OSError("no database")

    rt = runtime([calls(("t", {})), {"content": "x"}],
                 spec("t", lambda i: "ok", on_activate=activate))  # fmt: skip
    (record,) = drive(rt, mode).tool_call_history
    assert record.error == "activation of tool t failed: OSError: no database"


async def test_concurrent_calls_of_one_tool_activate_it_once() -> None:
    log: list[str] = []

    async def activate(context: ToolActorContext) -> None:
        await asyncio.sleep(0)
        log.append("activate")

    rt = runtime([calls(("t", {}), ("t", {}), ("t", {})), {"content": "x"}],
                 spec("t", lambda i: "ok", on_activate=activate))  # fmt: skip
    result = await rt.arun_tool_loop("go")
    assert log == ["activate"]
    assert all(r.success for r in result.tool_call_history)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("blocking", [False, True], ids=["inline", "pooled"])
def test_every_awaitable_a_sync_handler_s_stages_meet_is_settled(mode: str, blocking: bool) -> None:
    # An async hook, a policy that answers with a coroutine (its method is sync) and a
    # sync handler that returns one: in a sync run the stages run them to their end in
    # the thread they run in (the caller's, or a worker's), in the async driver on the loop.
    log: list[str] = []

    async def activate(context: ToolActorContext) -> None:
        await asyncio.sleep(0)
        log.append("activated")

    async def answer(query: PermissionQuery) -> str | None:
        await asyncio.sleep(0)
        return None if query.arguments.get("ok") else "refused, later"

    class Later:
        def authorize(self, query: PermissionQuery) -> Any:
            return answer(query)

    async def later(inputs: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return inputs["ok"]

    tool = spec("t", lambda i: later(i), on_activate=activate, blocking=blocking)
    rt = runtime(
        [calls(("t", {"ok": True}), ("t", {"ok": False})), {"content": "x"}], tool,
        policy=Later(),
    )  # fmt: skip
    done, refused = drive(rt, mode).tool_call_history
    assert (done.success, done.output) == (True, True)
    assert (refused.success, refused.error) == (False, "refused, later")
    assert log == ["activated"]


@pytest.mark.parametrize("mode", MODES)
def test_the_policy_can_refuse_a_call_which_becomes_a_failed_record(mode: str) -> None:
    asked: list[str] = []

    class DenyWrites:
        def authorize(self, query: PermissionQuery) -> str | None:
            asked.append(query.spec.name)
            return None if query.spec.kind == "read" else "denied by profile 'test': write"

    from cleveragents.tool import ToolAnnotations

    rt = runtime(
        [calls(("r", {}), ("w", {})), {"content": "x"}],
        spec("r", lambda i: "read", annotations=ToolAnnotations(read_only=True)),
        spec("w", lambda i: "wrote"),
        policy=DenyWrites(),
    )
    read, write = drive(rt, mode).tool_call_history
    assert (read.success, read.output) == (True, "read")
    assert (write.success, write.error) == (False, "denied by profile 'test': write")
    assert asked == ["r", "w"]


def test_the_runner_runs_a_single_call_outside_any_loop() -> None:
    registry = ToolRegistry()
    registry.register(spec("t", lambda i: i["sandbox_root"]))
    runner = ToolRunner(registry)
    record = runner.run(ToolCall("c1", "t", {}), ToolActorContext(sandbox_root="/w"))
    assert (record.success, record.output, record.call_id, record.iteration) == (
        True, "/w", "c1", 0,
    )  # fmt: skip
    missing = asyncio.run(runner.arun(ToolCall("c2", "missing", {})))
    assert (missing.success, missing.error) == (False, "unknown tool 'missing'")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("text", "problem"),
    [("{oops", "are not valid JSON: Expecting property"), ("[1]", "must be a JSON object")],
    ids=["not-json", "not-an-object"],
)
def test_arguments_that_are_not_a_json_object_are_an_input_error_said_once(
    mode: str, text: str, problem: str
) -> None:
    # The provider's argument text, collected as a stream does: the record says what
    # was wrong with it once, with the input error's code (-32015), not the generic one.
    call = CallDraft("c", "t/x", [text]).finish(lambda name: name, "c")
    assert call.parse_error is not None
    registry = ToolRegistry()
    registry.register(spec("t/x", lambda i: "ran"))
    runner = ToolRunner(registry)
    record = runner.run(call) if mode == "sync" else asyncio.run(runner.arun(call))
    assert (record.success, record.error_code) == (False, ToolInputError.code)
    assert record.error == call.parse_error
    assert record.error.startswith(f"the arguments of t/x {problem}")
    assert record.error.count("t/x") == 1


@pytest.mark.parametrize("mode", MODES)
def test_arguments_that_are_not_a_dict_are_an_input_error(mode: str) -> None:
    registry = ToolRegistry()
    registry.register(spec("t", lambda i: "ran"))
    runner = ToolRunner(registry)
    call = ToolCall("c", "t", [1, 2])  # type: ignore[arg-type]  # what a careless caller sends
    record = runner.run(call) if mode == "sync" else asyncio.run(runner.arun(call))
    assert (record.success, record.error_code) == (False, ToolInputError.code)
    assert record.error == "the arguments of t must be a JSON object, not list"


OUTPUTS = [
    {"a": 1, "b": [1.5, float("nan"), float("inf"), -float("inf")], "c": None, "d": 'é"\n'},
    [1, 2, {"x": object()}],
    {1: 2, 2.5: 3, False: 4, None: 5},
    12, 1.0, None, True, [],
]  # fmt: skip


@pytest.mark.parametrize("output", OUTPUTS)
def test_output_text_is_the_json_encoders_text(output: Any) -> None:
    # Outputs are serialised by the C encoder built once; the text must be what the
    # standard encoder with the same settings gives.
    reference = json.JSONEncoder(ensure_ascii=False, default=str).encode(output)
    assert output_text(output) == reference


def test_output_text_names_a_cycle() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="Circular reference"):
        output_text(cycle)
