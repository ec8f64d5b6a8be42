"""The async driver shares the event loop even when nothing it awaits suspends."""

from __future__ import annotations

import asyncio
import time

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


async def test_a_wide_iteration_of_instant_calls_gives_the_loop_turns() -> None:
    """A model may ask for thousands of calls at once; calls that never suspend run one
    after the other in the run's task, and must not hold the loop for all of them."""
    turns = 0
    seen_by_last = -1
    n = 2_000

    async def probe() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    def tool(inputs: dict[str, int]) -> int:
        nonlocal seen_by_last
        busy_until = time.perf_counter() + 10e-6  # each call does a little work
        while time.perf_counter() < busy_until:
            pass
        if inputs["i"] == n - 1:
            seen_by_last = turns
        return inputs["i"]

    wide = calls(*[("t", {"i": i}) for i in range(n)])
    rt = runtime([wide, {"content": "done"}], spec("t", tool, blocking=False))
    prober = asyncio.create_task(probe())
    await asyncio.sleep(0)
    turns = 0
    try:
        async with asyncio.timeout(30):
            result = await rt.arun_tool_loop("go")
    finally:
        prober.cancel()
    assert [r.output for r in result.tool_call_history] == list(range(n))
    assert seen_by_last > 0  # the probe ran while the iteration's calls were running
