"""Async calls of one iteration start in the awaiting task, and only the calls after the
first one that suspends get tasks of their own. What a task would give a call must hold
all the same: a call that suspends goes on in the task it started in (its timeouts and
cancel scopes work), the calls after it still overlap it, and each call has its own
copy of the context."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest
from toolkit import calls, runtime, spec

from cleveragents.tool import ToolCallingRuntime

MODES = ["sync", "async"]

marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")


def run(rt: ToolCallingRuntime, mode: str) -> Any:
    if mode == "sync":
        return rt.run_tool_loop("go")
    return asyncio.run(rt.arun_tool_loop("go"))


async def done_at_once(inputs: dict[str, Any]) -> Any:
    return "at once"


@pytest.mark.parametrize("mode", MODES)
def test_a_later_call_that_suspends_still_overlaps_the_calls_after_it(mode: str) -> None:
    third_started = asyncio.Event()

    async def waits_for_the_third(inputs: dict[str, Any]) -> Any:
        async with asyncio.timeout(5):
            await third_started.wait()
        return "second"

    async def third(inputs: dict[str, Any]) -> Any:
        third_started.set()
        return "third"

    rt = runtime(
        [calls(("first", {}), ("second", {}), ("third", {})), {"content": "x"}],
        spec("first", done_at_once), spec("second", waits_for_the_third), spec("third", third),
    )  # fmt: skip
    result = run(rt, mode)  # the event binds to the loop of its first wait
    assert [r.output for r in result.tool_call_history] == ["at once", "second", "third"]


@pytest.mark.parametrize("mode", MODES)
def test_a_timeout_inside_a_later_call_fires_in_that_call_and_the_run_goes_on(mode: str) -> None:
    async def times_out(inputs: dict[str, Any]) -> Any:
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"
        return "slept"

    rt = runtime(
        [calls(("first", {}), ("slow", {}), ("first", {})), {"content": "end"}],
        spec("first", done_at_once), spec("slow", times_out),
    )  # fmt: skip
    result = run(rt, mode)
    assert [r.output for r in result.tool_call_history] == ["at once", "timed out", "at once"]
    assert (result.content, result.cancelled, result.iterations) == ("end", False, 2)


@pytest.mark.parametrize("mode", MODES)
def test_a_cancel_scope_a_later_call_enters_is_left_in_the_same_task(mode: str) -> None:
    anyio = pytest.importorskip("anyio")

    async def scoped(inputs: dict[str, Any]) -> Any:
        with anyio.CancelScope():  # exiting in another task than it entered raises
            await anyio.sleep(0)
        with anyio.move_on_after(0.01):
            await anyio.sleep(5)
        return "scoped"

    rt = runtime(
        [calls(("first", {}), ("scoped", {}), ("scoped", {})), {"content": "end"}],
        spec("first", done_at_once), spec("scoped", scoped),
    )  # fmt: skip
    result = run(rt, mode)
    assert [(r.output, r.error) for r in result.tool_call_history] == [
        ("at once", None), ("scoped", None), ("scoped", None),
    ]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_each_call_has_its_own_copy_of_the_context(mode: str) -> None:
    async def sets(inputs: dict[str, Any]) -> Any:
        marker.set("set by a call")
        return marker.get()

    async def reads(inputs: dict[str, Any]) -> Any:
        return marker.get()

    rt = runtime(
        [calls(("sets", {}), ("reads", {}), ("sets", {}), ("reads", {})), {"content": "end"}],
        spec("sets", sets), spec("reads", reads),
    )  # fmt: skip
    result = run(rt, mode)
    assert [r.output for r in result.tool_call_history] == [
        "set by a call", "unset", "set by a call", "unset",
    ]  # fmt: skip
    assert marker.get() == "unset"
