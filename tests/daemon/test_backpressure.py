"""Backpressure: while the client is not reading, a run waits before its next model call
and before each tool call starts, instead of queueing output in the daemon's memory."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cleveragents.runs._prepare import GatedPolicy
from cleveragents.tool import PermissionQuery, ToolActorContext, ToolSpec
from kit.inprocess import Sink, in_process_daemon
from kit.rawpeer import body


class SlowReader(Sink):
    """A client whose pipe is full until ``reading`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = asyncio.Event()
        self.reading.set()
        self.stalled = asyncio.Event()

    async def pace(self) -> None:
        if not self.reading.is_set():
            self.stalled.set()
        await self.reading.wait()


async def test_a_run_makes_no_progress_while_the_client_is_not_reading(tmp_path: Path) -> None:
    sink = SlowReader()
    dispatcher, _ = await in_process_daemon(tmp_path, sink=sink)
    server: Any = dispatcher._handlers

    async def fill_the_pipe(inputs: dict[str, Any]) -> str:
        if not sink.stalled.is_set():
            sink.reading.clear()  # the first call's output is more than the client takes
        return "x" * 1000

    server.service.registry.register(ToolSpec("test/flood", "Floods.", {"type": "object"},
                                              fill_the_pipe))  # fmt: skip
    turns = [{"toolCalls": [{"name": "test/flood", "arguments": {}}]}] * 3 + [{"content": "end"}]
    dispatcher.receive(body({"jsonrpc": "2.0", "id": "start", "method": "run/start", "params": {
        "prompt": "go", "model": {"provider": "scripted", "script": turns},
        "automationProfile": "trusted"}}))  # fmt: skip
    await asyncio.wait_for(sink.stalled.wait(), 5)
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(sink.notifications("run/toolCall")) == 1  # stalled before the next model call
    assert len(sink.notifications("run/iteration")) == 1
    assert not sink.replies("start")
    sink.reading.set()
    await dispatcher.settle(timeout=10)
    (reply,) = sink.replies("start")
    assert reply["result"]["status"] == "completed"
    assert len(reply["result"]["toolCallHistory"]) == 3


async def test_a_tool_call_does_not_start_while_the_client_is_not_reading() -> None:
    sink = SlowReader()
    sink.reading.clear()
    asked: list[str] = []

    class Inner:
        def authorize(self, query: PermissionQuery, /) -> None:
            asked.append(query.call_id)

    class Peer:
        async def pace(self) -> None:
            await sink.pace()

    spec = ToolSpec("test/x", "X.", {"type": "object"}, lambda inputs: None)
    query = PermissionQuery(spec, {}, "c1", 1, ToolActorContext())
    decision = asyncio.ensure_future(GatedPolicy(Inner(), sink.pace, None).authorize(query))  # type: ignore[arg-type]
    await asyncio.wait_for(sink.stalled.wait(), 5)
    for _ in range(20):
        await asyncio.sleep(0)
    assert asked == []
    assert not decision.done()
    sink.reading.set()
    assert await asyncio.wait_for(decision, 5) is None
    assert asked == ["c1"]
