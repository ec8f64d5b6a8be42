"""The event-loop stall at the end of a 100,000-record run (goal: at most 50 ms).

One daemon, in process: the real server and dispatcher over a sink that keeps only the
frames it needs. A scripted model asks for 1,000 calls of a no-op tool per iteration for
100 iterations; the run then finishes (or, in the second round, is cancelled at 95% of its
records). A probe task wakes every millisecond and records how long the loop kept it
waiting: the longest wait from the last record to the ``run/start`` reply is the stall
every other request and run of the daemon would feel. A ``tools/list`` request is also
sent every 5 ms from another task through the dispatcher, and its worst latency printed.
The collector policy is installed as ``cleveragents serve`` installs it (``_collector``).

    python scripts/bench/run_end_stall.py [--calls N] [--iterations N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))

from _smoke import SMOKE, sized, verdict

from cleveragents.daemon import create_server
from cleveragents.rpc._dispatch import Dispatcher
from cleveragents.runs._collector import POLICY as COLLECTOR
from cleveragents.tool import ToolAnnotations, ToolSpec

GOAL_MS = 50.0
CANCEL_AT = 0.5 if SMOKE else 0.95
"""The share of the records after which the cancel mode cancels (a smoke run is too short
for its last 5% to outlast the 10 ms poll)."""


class Sink:
    """Counts bytes; notes when the run/start reply and tools/list replies arrive."""

    def __init__(self, records: int) -> None:
        self.records = records
        self.last_record_at: float | None = None
        self.bytes = 0
        self.largest = 0
        self.reply_at: float | None = None
        self.pings: dict[str, float] = {}

    def write(self, data: bytes) -> None:
        self.bytes += len(data)
        self.largest = max(self.largest, len(data))
        start = data.find(b"\r\n\r\n", 0, 64) + 4
        head = data[start : start + 48]
        if head.startswith(b'{"jsonrpc":"2.0","method":"run/toolCall"'):
            self.records -= 1
            if not self.records:
                self.last_record_at = time.perf_counter()
        elif head.startswith(b'{"jsonrpc":"2.0","id":"start"'):
            self.reply_at = time.perf_counter()
        elif head.startswith(b'{"jsonrpc":"2.0","id":"ping-'):
            end = head.index(b'"', 28)
            self.pings[head[28:end].decode()] = time.perf_counter()

    async def pace(self) -> None:
        return None


def send(dispatcher: Dispatcher, message: dict[str, Any]) -> None:
    dispatcher.receive(json.dumps({"jsonrpc": "2.0", **message}).encode())


async def one_round(calls: int, iterations: int, cancel: bool) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="cleveragents-stall-"))
    (scratch / "ws").mkdir()
    server = create_server(scratch / "state")
    target = calls * iterations
    sink = Sink(target)
    dispatcher = Dispatcher(server, sink)
    send(dispatcher, {"id": "init", "method": "initialize", "params": {
        "processId": None, "capabilities": {}, "rootUri": (scratch / "ws").as_uri(),
        "initializationOptions": {"automationProfile": "trusted"}}})  # fmt: skip

    async def noop(inputs: dict[str, Any]) -> str:
        return "ok"

    spec = ToolSpec("bench/noop", "No-op.", {"type": "object"}, noop,
                    annotations=ToolAnnotations(read_only=True))  # fmt: skip
    server.service.registry.register(spec)
    turn = {"content": "c", "toolCalls": [{"name": "bench/noop", "arguments": {"n": 1}}] * calls}
    send(dispatcher, {"id": "start", "method": "run/start", "params": {
        "prompt": "go", "runId": "big", "maxIterations": iterations,
        "model": {"provider": "scripted", "script": [turn]}}})  # fmt: skip

    waits: list[tuple[float, float]] = []
    sent: dict[str, float] = {}
    stop = False

    async def probe() -> None:
        last = time.perf_counter()
        while not stop:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            waits.append((now, now - last))
            last = now

    async def pinger() -> None:
        n = 0
        while not stop:
            await asyncio.sleep(0.005)
            n += 1
            sent[str(n)] = time.perf_counter()
            send(dispatcher, {"id": f"ping-{n}", "method": "tools/list", "params": {}})

    tasks = [asyncio.ensure_future(probe()), asyncio.ensure_future(pinger())]
    cancelled_at = 0.0
    begun = False
    while True:
        await asyncio.sleep(0.01)
        run = server.service.active.get("big")
        if run is None:
            # Not begun yet (run/start is prepared in a task of its own: a busy machine
            # can take more than one poll), or over; an answer means it will never begin.
            if begun or sink.reply_at is not None:
                break
            continue
        begun = True
        if cancel and not cancelled_at and run.tool_call_count >= target * CANCEL_AT:
            cancelled_at = time.perf_counter()
            send(dispatcher, {"id": "cx", "method": "run/cancel", "params": {"runId": "big"}})
    await dispatcher.settle(timeout=120)
    await asyncio.sleep(0.05)
    stop = True
    await asyncio.gather(*tasks)
    assert sink.reply_at is not None, "run/start was never answered"
    ending_from = cancelled_at if cancel else sink.last_record_at
    assert ending_from, "the run never reached its last record"
    ending = [wait for at, wait in waits if ending_from <= at <= sink.reply_at + 0.05]
    latencies = [
        sink.pings[k] - sent[k] for k in sent if k in sink.pings and sent[k] >= ending_from
    ]
    return {
        "mode": "cancel" if cancel else "finish",
        "records": target,
        "end_ms": round((sink.reply_at - ending_from) * 1000, 1),
        "worst_stall_ms": round(max(ending, default=0.0) * 1000, 1),
        "worst_stall_whole_run_ms": round(max(w for _, w in waits) * 1000, 1),
        "worst_request_ms": round(max(latencies, default=0.0) * 1000, 1),
        "largest_frame_mb": round(sink.largest / 1e6, 1),
    }


def main() -> int:
    COLLECTOR.install()  # as ``cleveragents serve`` does
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=sized(1000, 100))
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args()
    ok = True
    for cancel in (False, True):
        figures = asyncio.run(one_round(args.calls, args.iterations, cancel))
        figures["goal_ms"] = GOAL_MS
        print(json.dumps(figures))
        fine = figures["worst_stall_ms"] <= GOAL_MS
        ok = ok and fine
        print(
            f"{figures['mode']} a run of {figures['records']} records: the loop stalled at most "
            f"{figures['worst_stall_ms']} ms while it ended (goal <= {GOAL_MS:.0f} ms) "
            f"{'OK' if fine else 'MISSED'}; tools/list answered within "
            f"{figures['worst_request_ms']} ms meanwhile"
        )
    return verdict(ok)


if __name__ == "__main__":
    sys.exit(main())
