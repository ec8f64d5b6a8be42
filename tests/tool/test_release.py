"""A finished run's history is freed when the caller lets go of it, by reference
counting alone: a reference cycle would keep every record until a full garbage
collection, which on a daemon's heap is a pause of its own (a 100,000-record run held
the loop for 150 ms that way)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest
from toolkit import calls, runtime, spec

from cleveragents.tool import CancelToken, EventSink, RunEvent


class Sink(EventSink):
    """A sink that reads everything, so the run builds every event."""

    def on_event(self, event: RunEvent, /) -> None: ...


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _async_tool(inputs: dict[str, int]) -> int:
    return inputs["i"]


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_records_are_freed_without_the_garbage_collector(mode: str) -> None:
    script = [calls(*[("t", {"i": i}) for i in range(3)]), {"content": "done"}]
    rt = runtime(script, spec("t", _async_tool))
    if mode == "sync":
        result = rt.run_tool_loop("go", cancel=CancelToken(), sink=Sink())
    else:
        result = asyncio.run(rt.arun_tool_loop("go", cancel=CancelToken(), sink=Sink()))
    record = weakref.ref(result.tool_call_history[0])
    message = weakref.ref(result.messages[-1])
    del result, rt
    assert record() is None
    assert message() is None
