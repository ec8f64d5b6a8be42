"""The loop's semantics (design §3) and the reference's error table, through both drivers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from toolkit import RecordingSink, calls, runtime, spec

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import (
    CancelToken,
    LLMRequest,
    LLMResponse,
    ToolActorContext,
    ToolCall,
    ToolCallingRuntime,
    ToolRegistry,
    ToolRunner,
    Usage,
)


def echo(inputs: dict[str, Any]) -> Any:
    return {"echo": inputs.get("text"), "root": inputs["sandbox_root"]}


async def aecho(inputs: dict[str, Any]) -> Any:
    await asyncio.sleep(0)
    return {"echo": inputs.get("text")}


def run(rt: ToolCallingRuntime, mode: str, prompt: str = "go", **kw: Any) -> Any:
    if mode == "sync":
        return rt.run_tool_loop(prompt, **kw)
    return asyncio.run(rt.arun_tool_loop(prompt, **kw))


MODES = ["sync", "async"]


@pytest.mark.parametrize("mode", MODES)
def test_a_model_that_answers_at_once_takes_one_iteration(mode: str) -> None:
    rt = runtime([{"content": "hello"}])
    result = run(rt, mode)
    assert (result.content, result.iterations, result.terminated_by_limit) == ("hello", 1, False)
    assert result.tool_call_history == []


@pytest.mark.parametrize("mode", MODES)
def test_records_carry_the_number_of_the_llm_call_that_asked_for_them(mode: str) -> None:
    rt = runtime(
        [calls(("echo", {"text": "a"})), calls(("echo", {"text": "b"}), ("echo", {})),
         {"content": "done"}],
        spec("echo", echo),
    )  # fmt: skip
    result = run(rt, mode)
    assert result.iterations == 3
    assert [r.iteration for r in result.tool_call_history] == [1, 2, 2]
    assert [r.call_id for r in result.tool_call_history] == ["call_1_0", "call_2_0", "call_2_1"]
    assert result.content == "done"


@pytest.mark.parametrize("mode", MODES)
def test_the_limit_runs_the_last_calls_then_returns_partial_content(mode: str) -> None:
    rt = runtime([{"content": "still working", **calls(("echo", {}))}], spec("echo", echo),
                 max_iterations=3)  # fmt: skip
    result = run(rt, mode)
    assert result.terminated_by_limit is True
    assert result.iterations == 3
    assert len(result.tool_call_history) == 3  # the last allowed call's tools ran too
    assert result.content == "still working"


@pytest.mark.parametrize("mode", MODES)
def test_a_per_run_max_iterations_overrides_the_runtime_default(mode: str) -> None:
    rt = runtime([calls(("echo", {}))], spec("echo", echo), max_iterations=10)
    result = run(rt, mode, max_iterations=2)
    assert (result.iterations, result.terminated_by_limit) == (2, True)


@pytest.mark.parametrize("mode", MODES)
def test_text_is_never_none_at_the_limit(mode: str) -> None:
    rt = runtime([calls(("echo", {}))], spec("echo", echo), max_iterations=1)
    assert run(rt, mode).content == ""


@pytest.mark.parametrize("mode", MODES)
def test_unknown_tool_gives_a_failed_record_and_the_run_goes_on(mode: str) -> None:
    rt = runtime([calls(("nope", {})), {"content": "recovered"}])
    result = run(rt, mode)
    (record,) = result.tool_call_history
    assert record.success is False
    assert record.error == "unknown tool 'nope'"
    assert result.content == "recovered"
    tool_message = result.messages[-2]
    assert (tool_message.role, tool_message.is_error) == ("tool", True)
    assert tool_message.content == "unknown tool 'nope'"


@pytest.mark.parametrize("mode", MODES)
def test_a_raising_handler_gives_a_failed_record_with_the_error(mode: str) -> None:
    def boom(inputs: dict[str, Any]) -> Any:
        raise RuntimeError("disk on fire")

    rt = runtime([calls(("boom", {})), {"content": "ok"}], spec("boom", boom))
    (record,) = run(rt, mode).tool_call_history
    assert (record.success, record.error, record.output) == (
        False, "RuntimeError: disk on fire", None,
    )  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_fail_with_an_error_naming_the_field(mode: str) -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["path"],
    }
    rt = runtime(
        [calls(("t", {"path": "a", "count": "three"}), ("t", {})), {"content": "x"}],
        spec("t", echo, schema),
    )
    bad_type, missing = run(rt, mode).tool_call_history
    assert not bad_type.success
    assert "arguments.count" in (bad_type.error or "")
    assert not missing.success
    assert "path" in (missing.error or "")


@pytest.mark.parametrize("mode", MODES)
def test_output_is_validated_when_an_output_schema_is_set(mode: str) -> None:
    rt = runtime(
        [calls(("t", {})), {"content": "x"}],
        spec("t", lambda i: {"n": "not a number"}, output_schema={
            "type": "object", "properties": {"n": {"type": "integer"}}}),
    )  # fmt: skip
    (record,) = run(rt, mode).tool_call_history
    assert not record.success
    assert "output.n" in (record.error or "")


@pytest.mark.parametrize("mode", MODES)
def test_a_model_cannot_override_the_reserved_inputs(mode: str) -> None:
    seen: list[dict[str, Any]] = []

    def capture(inputs: dict[str, Any]) -> Any:
        seen.append(inputs)
        return "ok"

    rt = runtime(
        [calls(("t", {"sandbox_root": "/", "resource_bindings": {"x": 1}, "a": 1})),
         {"content": "done"}],
        spec("t", capture),
    )  # fmt: skip
    context = ToolActorContext(sandbox_root="/tmp/sandbox", resource_bindings={"db": "main"})
    result = run(rt, mode, context=context)
    assert seen == [{"a": 1, "sandbox_root": "/tmp/sandbox", "resource_bindings": {"db": "main"}}]
    # The record keeps what the model sent.
    assert result.tool_call_history[0].inputs == {
        "sandbox_root": "/", "resource_bindings": {"x": 1}, "a": 1,
    }  # fmt: skip


def test_reserved_inputs_are_never_shown_to_the_model() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "sandbox_root": {"type": "string"}},
        "required": ["path", "sandbox_root"],
        "additionalProperties": False,
    }
    seen: list[Any] = []

    def model(request: LLMRequest) -> LLMResponse:
        seen.append(request.tools)
        return LLMResponse("done")

    registry = ToolRegistry()
    registry.register(spec("t", echo, schema))
    ToolCallingRuntime(registry, ToolRunner(registry), model).run_tool_loop("go")
    (tool,) = seen[0]
    assert tool.parameters == {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("mode", MODES)
def test_the_context_history_grows_and_equals_the_result_history(mode: str) -> None:
    sizes: list[int] = []
    context = ToolActorContext()

    def observe(inputs: dict[str, Any]) -> Any:
        sizes.append(len(context.tool_call_history))
        return None

    rt = runtime([calls(("t", {})), calls(("t", {})), {"content": "end"}], spec("t", observe))
    result = run(rt, mode, context=context)
    assert sizes == [0, 1]
    assert context.tool_call_history == result.tool_call_history


@pytest.mark.parametrize("mode", MODES)
def test_sync_and_async_handlers_both_run(mode: str) -> None:
    rt = runtime(
        [calls(("s", {"text": "one"}), ("a", {"text": "two"})), {"content": "x"}],
        spec("s", echo), spec("a", aecho),
    )  # fmt: skip
    first, second = run(rt, mode, context=ToolActorContext(sandbox_root="/w")).tool_call_history
    assert first.output == {"echo": "one", "root": "/w"}
    assert second.output == {"echo": "two"}
    assert first.success
    assert second.success


def test_calls_of_one_iteration_run_concurrently_and_keep_the_model_order_sync() -> None:
    second_started = threading.Event()

    def first(inputs: dict[str, Any]) -> Any:
        # Finishes only once the second call is running: impossible if run one by one.
        assert second_started.wait(5), "the calls did not run concurrently"
        return "first"

    def second(inputs: dict[str, Any]) -> Any:
        second_started.set()
        return "second"

    rt = runtime([calls(("first", {}), ("second", {})), {"content": "x"}],
                 spec("first", first), spec("second", second))  # fmt: skip
    result = rt.run_tool_loop("go")
    assert [r.output for r in result.tool_call_history] == ["first", "second"]
    assert all(r.success for r in result.tool_call_history)


async def test_calls_of_one_iteration_run_concurrently_and_keep_the_model_order_async() -> None:
    second_started = asyncio.Event()

    async def first(inputs: dict[str, Any]) -> Any:
        async with asyncio.timeout(5):
            await second_started.wait()
        return "first"

    async def second(inputs: dict[str, Any]) -> Any:
        second_started.set()
        return "second"

    rt = runtime([calls(("first", {}), ("second", {})), {"content": "x"}],
                 spec("first", first), spec("second", second))  # fmt: skip
    result = await rt.arun_tool_loop("go")
    assert [r.output for r in result.tool_call_history] == ["first", "second"]


@pytest.mark.parametrize("mode", MODES)
def test_a_handler_over_its_timeout_gives_a_timeout_record(mode: str) -> None:
    release = threading.Event()

    def slow(inputs: dict[str, Any]) -> Any:
        release.wait(10)
        return "late"

    class ReleaseOnRecord(RecordingSink):
        def on_tool_call(self, record: Any) -> None:
            release.set()  # let the abandoned worker thread finish

    rt = runtime([calls(("slow", {})), {"content": "x"}], spec("slow", slow, timeout_s=0.05))
    (record,) = run(rt, mode, sink=ReleaseOnRecord()).tool_call_history
    assert not record.success
    assert record.error == "tool slow timed out after 0.05 s"


async def test_an_async_handler_over_its_timeout_is_cancelled() -> None:
    cancelled = asyncio.Event()

    async def slow(inputs: dict[str, Any]) -> Any:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    rt = runtime([calls(("slow", {})), {"content": "x"}], spec("slow", slow, timeout_s=0.05))
    (record,) = (await rt.arun_tool_loop("go")).tool_call_history
    assert record.error == "tool slow timed out after 0.05 s"
    assert cancelled.is_set()


@pytest.mark.parametrize("mode", MODES)
def test_the_sink_sees_every_event_in_order(mode: str) -> None:
    sink = RecordingSink()
    rt = runtime([{"content": "thinking", **calls(("t", {}))}, {"content": "done"}],
                 spec("t", echo))  # fmt: skip
    result = run(rt, mode, sink=sink)
    assert sink.kinds() == [
        "iteration_started", "delta", "tool_started", "tool_call", "iteration",
        "iteration_started", "delta", "iteration",
    ]  # fmt: skip
    summaries = [p for k, p in sink.events if k == "iteration"]
    assert [(s.iteration, s.content, s.tool_call_count) for s in summaries] == [
        (1, "thinking", 1), (2, "done", 0),
    ]  # fmt: skip
    assert sink.events[-1][1].content == result.content  # the last iteration's text


@pytest.mark.parametrize("mode", MODES)
def test_usage_is_summed_over_iterations(mode: str) -> None:
    responses = iter([
        LLMResponse("", [ToolCall("c1", "t", {})], Usage(10, 2)),
        LLMResponse("done", [], Usage(5, 3)),
    ])  # fmt: skip

    def model(request: LLMRequest) -> LLMResponse:
        return next(responses)

    registry = ToolRegistry()
    registry.register(spec("t", echo))
    result = run(ToolCallingRuntime(registry, ToolRunner(registry), model), mode)
    assert result.usage == Usage(15, 5)


async def test_an_async_model_works_in_the_sync_driver_too() -> None:
    async def model(request: LLMRequest) -> LLMResponse:
        return LLMResponse("async answer")

    registry = ToolRegistry()
    rt = ToolCallingRuntime(registry, ToolRunner(registry), model)
    assert (await asyncio.to_thread(rt.run_tool_loop, "go")).content == "async answer"
    assert (await rt.arun_tool_loop("go")).content == "async answer"


def test_history_continues_an_earlier_conversation() -> None:
    rt = runtime([{"content": "first"}])
    first = rt.run_tool_loop("one")
    seen: list[int] = []

    def model(request: LLMRequest) -> LLMResponse:
        seen.append(len(request.messages))
        return LLMResponse("second")

    registry = ToolRegistry()
    second = ToolCallingRuntime(registry, ToolRunner(registry), model).run_tool_loop(
        "two", history=first.messages
    )
    assert seen == [3]  # user, assistant, user
    assert [m.content for m in second.messages] == ["one", "first", "two", "second"]


# -- cancellation ------------------------------------------------------------------------


async def test_cancel_during_a_tool_call_returns_the_records_so_far_and_stops_the_tool() -> None:
    token = CancelToken()
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def hang(inputs: dict[str, Any]) -> Any:
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            stopped.set()

    rt = runtime([calls(("fast", {}), ("hang", {})), {"content": "never"}],
                 spec("fast", aecho), spec("hang", hang))  # fmt: skip
    task = asyncio.create_task(rt.arun_tool_loop("go", cancel=token))
    async with asyncio.timeout(5):
        await started.wait()
    token.cancel()
    async with asyncio.timeout(5):
        result = await task
    assert result.cancelled is True
    assert result.terminated_by_limit is False
    fast, hung = result.tool_call_history
    assert fast.success is True
    assert (hung.success, hung.error) == (
        False,
        "cancelled: the run was cancelled before the tool finished",
    )
    assert stopped.is_set()  # no tool left running
    assert result.iterations == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_cancel_keeps_finished_records_in_the_model_order_whichever_call_hangs(
    mode: str,
) -> None:
    # The first call runs in the driving task, the others in tasks of their own: a cancel
    # must give each call one record, in the model's order, reported once.
    token = CancelToken()
    hanging = 0

    async def hang(inputs: dict[str, Any]) -> Any:
        nonlocal hanging
        hanging += 1
        if hanging == 2:  # both hang: the fast call has finished by now
            token.cancel()
        await asyncio.sleep(30)

    sink = RecordingSink()
    rt = runtime([calls(("hang", {}), ("fast", {}), ("hang", {})), {"content": "never"}],
                 spec("hang", hang), spec("fast", aecho))  # fmt: skip
    result = run(rt, mode, cancel=token, sink=sink)
    assert result.cancelled
    assert [(r.tool_name, r.success) for r in result.tool_call_history] == [
        ("hang", False), ("fast", True), ("hang", False),
    ]  # fmt: skip
    reported = [record for kind, record in sink.events if kind == "tool_call"]
    assert sorted(map(id, reported)) == sorted(map(id, result.tool_call_history))


async def test_cancel_during_the_model_call_ends_the_run() -> None:
    token = CancelToken()
    entered = asyncio.Event()

    async def slow_model(request: LLMRequest) -> LLMResponse:
        entered.set()
        await asyncio.sleep(30)
        return LLMResponse("never")

    registry = ToolRegistry()
    rt = ToolCallingRuntime(registry, ToolRunner(registry), slow_model)
    task = asyncio.create_task(rt.arun_tool_loop("go", cancel=token))
    async with asyncio.timeout(5):
        await entered.wait()
    token.cancel()
    async with asyncio.timeout(5):
        result = await task
    assert (result.cancelled, result.iterations, result.content) == (True, 1, "")


def test_cancel_from_another_thread_stops_a_sync_run() -> None:
    token = CancelToken()
    started = threading.Event()
    release = threading.Event()

    def hang(inputs: dict[str, Any]) -> Any:
        started.set()
        release.wait(10)
        return "late"

    rt = runtime([calls(("hang", {})), {"content": "never"}], spec("hang", hang))
    canceller = threading.Thread(target=lambda: (started.wait(5), token.cancel()))
    canceller.start()
    try:
        result = rt.run_tool_loop("go", cancel=token)
    finally:
        release.set()
        canceller.join(5)
    assert result.cancelled
    assert result.tool_call_history[0].error.startswith("cancelled")  # type: ignore[union-attr]


async def test_an_outside_cancel_of_the_task_still_propagates() -> None:
    entered = asyncio.Event()

    async def slow_model(request: LLMRequest) -> LLMResponse:
        entered.set()
        await asyncio.sleep(30)
        return LLMResponse("never")

    registry = ToolRegistry()
    rt = ToolCallingRuntime(registry, ToolRunner(registry), slow_model)
    task = asyncio.create_task(rt.arun_tool_loop("go"))
    async with asyncio.timeout(5):
        await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- construction and prompt errors (the reference's error table) ------------------------


def test_an_empty_prompt_is_a_value_error() -> None:
    rt = runtime([{"content": "x"}])
    with pytest.raises(ValueError, match="prompt"):
        rt.run_tool_loop("")
    with pytest.raises(ValueError, match="prompt"):
        asyncio.run(rt.arun_tool_loop("   "))


def test_an_invalid_registry_or_runner_is_a_type_error() -> None:
    registry = ToolRegistry()
    model = ScriptedModel([{"content": "x"}])
    with pytest.raises(TypeError, match="registry"):
        ToolCallingRuntime(registry={}, runner=ToolRunner(registry), llm_caller=model)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="runner"):
        ToolCallingRuntime(registry=registry, runner=object(), llm_caller=model)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1])
def test_max_iterations_below_one_is_a_value_error_at_construction(limit: int) -> None:
    registry = ToolRegistry()
    with pytest.raises(ValueError, match="max_iterations"):
        ToolCallingRuntime(
            registry, ToolRunner(registry), ScriptedModel([{}]), max_iterations=limit
        )


def test_a_model_returning_the_wrong_type_fails_loudly() -> None:
    registry = ToolRegistry()
    rt = ToolCallingRuntime(registry, ToolRunner(registry), lambda request: "text")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="LLMResponse"):
        rt.run_tool_loop("go")


@pytest.mark.parametrize("mode", MODES)
def test_schema_defaults_are_not_written_into_the_models_arguments(mode: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 5}}}
    seen: list[dict[str, Any]] = []
    rt = runtime([calls(("t", {})), {"content": "x"}],
                 spec("t", lambda i: seen.append(dict(i)), schema))  # fmt: skip
    (record,) = run(rt, mode).tool_call_history
    assert record.inputs == {}
    assert "n" not in seen[0]


async def test_each_record_reaches_the_sink_as_soon_as_its_call_ends() -> None:
    fast_reported = asyncio.Event()

    class Sink(RecordingSink):
        def on_tool_call(self, record: Any) -> None:
            super().on_tool_call(record)
            if record.tool_name == "fast":
                fast_reported.set()

    async def slow(inputs: dict[str, Any]) -> Any:
        # Ends only after the sink has seen the other call's record: impossible if
        # records were reported once the whole iteration was done.
        async with asyncio.timeout(5):
            await fast_reported.wait()
        return "slow"

    rt = runtime([calls(("slow", {}), ("fast", {})), {"content": "x"}],
                 spec("slow", slow), spec("fast", aecho))  # fmt: skip
    sink = Sink()
    result = await rt.arun_tool_loop("go", sink=sink)
    assert [r.tool_name for r in result.tool_call_history] == ["slow", "fast"]  # model order
    reported = [p.tool_name for k, p in sink.events if k == "tool_call"]
    assert reported == ["fast", "slow"]  # completion order


def test_each_record_reaches_the_sink_as_soon_as_its_call_ends_sync() -> None:
    fast_reported = threading.Event()

    class Sink(RecordingSink):
        def on_tool_call(self, record: Any) -> None:
            super().on_tool_call(record)
            if record.tool_name == "fast":
                fast_reported.set()

    def slow(inputs: dict[str, Any]) -> Any:
        assert fast_reported.wait(5), "the fast record was not reported before the batch ended"
        return "slow"

    rt = runtime([calls(("slow", {}), ("fast", {})), {"content": "x"}],
                 spec("slow", slow), spec("fast", lambda i: "fast"))  # fmt: skip
    result = rt.run_tool_loop("go", sink=Sink())
    assert [r.output for r in result.tool_call_history] == ["slow", "fast"]


async def test_the_history_grows_with_each_record_in_the_models_order() -> None:
    context = ToolActorContext()
    seen: list[list[str]] = []
    first_done = asyncio.Event()

    async def first(inputs: dict[str, Any]) -> Any:
        return "first"

    async def second(inputs: dict[str, Any]) -> Any:
        # The first call has ended: its record is in the history before this one ends.
        async with asyncio.timeout(5):
            while len(context.tool_call_history) < 1:
                await first_done.wait()
        seen.append([r.tool_name for r in context.tool_call_history])
        return "second"

    class Sink(RecordingSink):
        def on_tool_call(self, record: Any) -> None:
            super().on_tool_call(record)
            if record.tool_name == "first":
                first_done.set()

    rt = runtime([calls(("first", {}), ("second", {})), {"content": "x"}],
                 spec("first", first), spec("second", second))  # fmt: skip
    result = await rt.arun_tool_loop("go", context, sink=Sink())
    assert seen == [["first"]]
    assert context.tool_call_history == result.tool_call_history
    assert [r.tool_name for r in result.tool_call_history] == ["first", "second"]


async def test_a_later_call_ending_first_waits_for_its_predecessor_in_the_history() -> None:
    context = ToolActorContext()
    second_reported = asyncio.Event()
    seen: list[int] = []

    async def first(inputs: dict[str, Any]) -> Any:
        async with asyncio.timeout(5):
            await second_reported.wait()
        seen.append(len(context.tool_call_history))  # the second's record is held back
        return "first"

    class Sink(RecordingSink):
        def on_tool_call(self, record: Any) -> None:
            super().on_tool_call(record)
            if record.tool_name == "second":
                second_reported.set()

    rt = runtime([calls(("first", {}), ("second", {})), {"content": "x"}],
                 spec("first", first), spec("second", aecho))  # fmt: skip
    result = await rt.arun_tool_loop("go", context, sink=Sink())
    assert seen == [0]
    assert [r.tool_name for r in context.tool_call_history] == ["first", "second"]
    assert context.tool_call_history == result.tool_call_history


@pytest.mark.parametrize("mode", MODES)
def test_pace_is_awaited_before_every_model_call_and_a_cancel_interrupts_it(mode: str) -> None:
    """A face's backpressure: each model call waits for ``pace``; a run held there is
    still cancellable."""
    order: list[str] = []
    rt = runtime([{"content": "a", **calls(("t", {}))}, {"content": "b"}],
                 spec("t", lambda inputs: order.append("tool") or "ok"))  # fmt: skip

    async def pace() -> None:
        order.append("pace")

    rt.pace = pace
    sink = RecordingSink()
    result = run(rt, mode, sink=sink)
    assert result.content == "b"
    assert order == ["pace", "tool", "pace"]

    token = CancelToken()

    async def never() -> None:
        token.cancel("stop")
        await asyncio.Event().wait()

    rt.pace = never
    held = run(rt, mode, cancel=token)
    assert held.cancelled
    assert held.iterations == 1
    assert held.tool_call_history == []
