"""Every frame the daemon writes fits the limit it reads: a run whose RunResult would
not fit one frame gets a ``run/finished`` and a ``run/start`` reply that do, with the
oldest records left out (``omittedRecords``) and the newest kept.

In process, through the real dispatcher and run manager, with the frame limit patched
down (both modules read it at call time) so that the test moves kilobytes, not 64 MiB.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from cleveragents.protocol import MAX_BODY, _events
from cleveragents.rpc import _outbound
from cleveragents.rpc._dispatch import Dispatcher
from kit.inprocess import Sink, in_process_daemon
from kit.rawpeer import body

LIMIT = 256 * 1024
OUTPUT = "x" * 20_000  # under the output cap; 20 of them are over LIMIT
CALLS = 20


class AnsweringSink(Sink):
    """Keeps each frame's body size, and answers the daemon's tools/call with OUTPUT."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.dispatcher: Dispatcher | None = None

    def write(self, data: bytes) -> None:
        super().write(data)
        self.sizes.append(len(data.partition(b"\r\n\r\n")[2]))
        frame = self.frames[-1]
        if frame.get("method") == "tools/call" and self.dispatcher is not None:
            reply = body({"jsonrpc": "2.0", "id": frame["id"], "result": {"output": OUTPUT}})
            asyncio.get_running_loop().call_soon(self.dispatcher.receive, reply)


@pytest.fixture
def small_frames(monkeypatch: pytest.MonkeyPatch) -> int:
    """The frame limit patched down to LIMIT, keeping the room left for the envelope."""
    envelope = MAX_BODY - _events.FRAME_ROOM
    monkeypatch.setattr(_outbound, "MAX_BODY", LIMIT)
    monkeypatch.setattr(_events, "FRAME_ROOM", LIMIT - envelope)
    return LIMIT


async def test_a_result_over_one_frame_keeps_its_newest_records_and_fits(
    tmp_path: Path, small_frames: int
) -> None:
    sink = AnsweringSink()
    dispatcher, _ = await in_process_daemon(tmp_path, {"automationProfile": "trusted"}, sink)
    sink.dispatcher = dispatcher
    dispatcher.receive(body({"jsonrpc": "2.0", "id": "reg", "method": "tools/register",
                             "params": {"tools": [{"name": "client/big", "description": "Big.",
                                                   "inputSchema": {"type": "object"}}]}}))  # fmt: skip
    turns: list[dict[str, Any]] = [
        {"content": f"call {n}", "toolCalls": [{"name": "client/big", "arguments": {"n": n}}]}
        for n in range(CALLS)
    ]
    model = {"provider": "scripted", "script": [*turns, {"content": "done"}]}
    dispatcher.receive(body({"jsonrpc": "2.0", "id": "run", "method": "run/start",
                             "params": {"prompt": "go", "runId": "big", "model": model,
                                        "maxIterations": CALLS + 1}}))  # fmt: skip
    async with asyncio.timeout(20):
        while not sink.replies("run"):
            await dispatcher.settle(timeout=5)
    (reply,) = sink.replies("run")
    assert "result" in reply, reply  # not -32603 "the reply would be over the limit"
    result = reply["result"]
    assert result["status"] == "completed"
    (finished,) = sink.notifications("run/finished")
    assert finished["result"] == result
    assert max(sink.sizes) <= small_frames  # run/finished and the reply included
    sent = [p["record"]["callId"] for p in sink.notifications("run/toolCall")]
    assert len(sent) == CALLS
    kept = [r["callId"] for r in result["toolCallHistory"]]
    assert all(r["output"] == OUTPUT for r in result["toolCallHistory"])
    assert result["omittedRecords"] > 0
    assert result["omittedRecords"] + len(kept) == CALLS
    assert kept == sent[-len(kept) :]  # the newest
    assert kept
    lines = (tmp_path / "state" / "runs" / "big.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["params"]["result"] == result
