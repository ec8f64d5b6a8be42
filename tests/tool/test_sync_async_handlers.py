"""Async handlers in a sync run (``run_tool_loop``): one event loop for the whole run,
closed with it; each call sees its own ``ToolCallContext``; a call that timed out is
cancelled, not left holding a worker thread; a caller already inside an event loop
still gets its answer."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import (
    ToolActorContext,
    ToolCallContext,
    ToolCallingRuntime,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
    ToolTimeoutError,
)


def _run(spec: ToolSpec, turns: list[Any]) -> Any:
    registry = ToolRegistry()
    registry.register(spec)
    runtime = ToolCallingRuntime(registry=registry, runner=ToolRunner(registry),
                                 llm_caller=ScriptedModel(turns), max_iterations=5)  # fmt: skip
    return runtime.run_tool_loop("go", ToolActorContext(sandbox_root="/tmp"))


def test_one_event_loop_serves_a_runs_async_handlers_and_closes_with_it() -> None:
    loops: list[asyncio.AbstractEventLoop] = []
    seen: list[str] = []

    async def handler(inputs: dict[str, Any], call: ToolCallContext) -> str:
        loops.append(asyncio.get_running_loop())
        seen.append(call.call_id)
        return "ok"

    calls = [{"name": "t/a", "arguments": {}, "id": f"c{i}"} for i in range(3)]
    turns = [{"toolCalls": calls}, {"toolCalls": calls[:1]}, {"content": "done"}]
    result = _run(ToolSpec("t/a", "A.", {"type": "object"}, handler), turns)
    assert [r.success for r in result.tool_call_history] == [True] * 4
    assert len({id(loop) for loop in loops}) == 1  # not one loop per call
    assert loops[0].is_closed()  # and none left behind
    assert sorted(seen) == ["c0", "c0", "c1", "c2"]  # each call saw itself
    again: list[asyncio.AbstractEventLoop] = []

    async def other(inputs: dict[str, Any]) -> str:
        again.append(asyncio.get_running_loop())
        return "ok"

    _run(ToolSpec("t/a", "A.", {"type": "object"}, other), turns[1:])
    assert again[0] is not loops[0]  # a new run, a new loop


def test_a_timed_out_async_call_is_cancelled_when_the_run_ends() -> None:
    ended = threading.Event()

    async def slow(inputs: dict[str, Any]) -> str:
        try:
            await asyncio.sleep(30)
            return "late"
        finally:
            ended.set()

    spec = ToolSpec("t/slow", "Slow.", {"type": "object"}, slow, timeout_s=0.05)
    result = _run(spec, [{"toolCalls": [{"name": "t/slow", "arguments": {}}]}, {"content": "x"}])
    (record,) = result.tool_call_history
    assert (record.success, record.error_code) == (False, ToolTimeoutError.code)
    assert ended.wait(5)  # cancelled at its timeout, not after 30 s


async def test_a_sync_run_called_inside_an_event_loop_still_runs_its_async_handlers() -> None:
    async def handler(inputs: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        return "ok"

    turns = [{"toolCalls": [{"name": "t/a", "arguments": {}}]}, {"content": "done"}]
    # A blocking call from a coroutine (not advised, but it must not deadlock or raise).
    result = _run(ToolSpec("t/a", "A.", {"type": "object"}, handler), turns)
    assert [r.output for r in result.tool_call_history] == ["ok"]
    assert result.content == "done"
