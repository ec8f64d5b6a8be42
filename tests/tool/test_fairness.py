"""The async driver shares the event loop even when nothing it awaits suspends."""

from __future__ import annotations

import asyncio

from toolkit import calls, runtime, spec

from cleveragents.tool import CancelToken


async def test_a_cancel_lands_in_a_run_whose_model_and_tools_never_suspend() -> None:
    running = asyncio.Event()

    def tool(inputs: object) -> str:
        running.set()  # only another task's turn can act on this
        return "ok"

    rt = runtime([calls(("t", {}))], spec("t", tool, blocking=False), max_iterations=1_000_000)
    token = CancelToken()
    task = asyncio.create_task(rt.arun_tool_loop("go", cancel=token))
    async with asyncio.timeout(5):
        await running.wait()  # this task gets a turn while the run is going
    token.cancel()
    async with asyncio.timeout(5):
        result = await task
    assert result.cancelled is True
    assert result.terminated_by_limit is False
    assert result.iterations < 1_000_000


async def test_two_instant_runs_interleave_instead_of_running_one_after_the_other() -> None:
    order: list[str] = []

    def tool(name: str):  # type: ignore[no-untyped-def]
        return lambda inputs: order.append(name)

    a = runtime([calls(("t", {}))], spec("t", tool("a"), blocking=False), max_iterations=3000)
    b = runtime([calls(("t", {}))], spec("t", tool("b"), blocking=False), max_iterations=3000)
    async with asyncio.timeout(30):
        await asyncio.gather(a.arun_tool_loop("go"), b.arun_tool_loop("go"))
    first_b = order.index("b")
    assert first_b < 3000  # b started before a finished
