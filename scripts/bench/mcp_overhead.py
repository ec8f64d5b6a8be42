"""MCP servers as a tool source: connect time and per-call overhead.

The same real stdio MCP server (``tests/mcp/servers/sdk_server.py``, built with the SDK)
is reached two ways in one run:

- **floor**: the official SDK alone (``mcp.Client`` in ``legacy`` mode for 2025-11-25,
  pinned to ``2026-07-28`` for the other), as a program using the SDK directly would;
- **ours**: ``cleveragents.mcp.McpServer``, which the daemon uses (background start,
  version detection, stderr log, tools as ``ToolSpec``s, per-call timeout).

Connect: from configuring the server to its tools being listed, per protocol version,
and with the version left to detection (the case of a new server). Goal: within 1 s of
the server's own start, that is at most the floor plus 1 s. Per call: ``echo_text``,
the median of several rounds of N calls each, through the ``ToolSpec`` handler (what the
runner calls) against ``Client.call_tool``; printed as a ratio.

    python scripts/bench/mcp_overhead.py [--calls N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))

from _smoke import sized, verdict

from cleveragents.mcp import McpServer, McpServerConfig
from cleveragents.tool import CancelToken, ToolActorContext, ToolCallContext
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]

SERVER = str(ROOT / "tests" / "mcp" / "servers" / "sdk_server.py")
CONNECT_GOAL_S = 1.0
CONNECTS = sized(3, 1)
VERSIONS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}


def _ours(log_dir: Path, protocol: str | None) -> McpServer:
    config = McpServerConfig(name="bench", command=sys.executable, args=(SERVER,),
                             protocol=protocol)  # type: ignore[arg-type]  # fmt: skip
    return McpServer(config, scope="daemon", log_dir=log_dir, base_env={"PATH": "/usr/bin:/bin"})


async def connect_ours(log_dir: Path, protocol: str | None) -> float:
    started = time.perf_counter()
    server = _ours(log_dir, protocol)
    server.start()
    await server.wait_ready(timeout=30)
    elapsed = time.perf_counter() - started
    assert server.status == "ready", (server.status, server.error)
    assert server.tool_specs(), "no tools listed"
    await server.stop()
    return elapsed


async def connect_sdk(mode: str) -> float:
    started = time.perf_counter()
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    async with Client(params, mode=mode) as client:
        assert (await client.list_tools()).tools
        return time.perf_counter() - started


async def per_call(log_dir: Path, calls: int, rounds: int) -> tuple[float, float]:
    arguments: dict[str, Any] = {"text": "hello"}
    server = _ours(log_dir, "2025-11-25")
    server.start()
    await server.wait_ready(timeout=30)
    (spec,) = [s for s in server.tool_specs() if s.name == "mcp:bench/echo_text"]
    handler: Any = spec.handler
    call = ToolCallContext("bench", spec.name, 1, arguments, ToolActorContext(), CancelToken())
    ours: list[float] = []
    floor: list[float] = []
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    async with Client(params, mode="legacy") as client:
        for _ in range(sized(5, 1)):  # warm both
            await handler(dict(arguments), call)
            await client.call_tool("echo_text", arguments)
        for _ in range(rounds):
            started = time.perf_counter()
            for _ in range(calls):
                await handler(dict(arguments), call)
            ours.append((time.perf_counter() - started) / calls)
            started = time.perf_counter()
            for _ in range(calls):
                await client.call_tool("echo_text", arguments)
            floor.append((time.perf_counter() - started) / calls)
    await server.stop()
    return statistics.median(ours), statistics.median(floor)


async def main(calls: int, rounds: int) -> int:
    ok = True
    with tempfile.TemporaryDirectory() as scratch:
        logs = Path(scratch)
        print(f"connect: configure -> tools listed (median of {CONNECTS})")
        for version, mode in VERSIONS.items():
            floor = statistics.median([await connect_sdk(mode) for _ in range(CONNECTS)])
            ours = statistics.median([await connect_ours(logs, version) for _ in range(CONNECTS)])
            fine = ours <= floor + CONNECT_GOAL_S
            ok = ok and fine
            print(f"  {version}  ours {ours * 1000:6.0f} ms   SDK alone {floor * 1000:6.0f} ms"
                  f"   extra {(ours - floor) * 1000:+5.0f} ms (goal <= +1000 ms)"
                  f" {'OK' if fine else 'MISSED'}")  # fmt: skip
        detected = statistics.median([await connect_ours(logs, None) for _ in range(CONNECTS)])
        floor = statistics.median([await connect_sdk("legacy") for _ in range(CONNECTS)])
        fine = detected <= floor + CONNECT_GOAL_S
        ok = ok and fine
        print(f"  detected    ours {detected * 1000:6.0f} ms   SDK legacy {floor * 1000:6.0f} ms"
              f"   extra {(detected - floor) * 1000:+5.0f} ms (goal <= +1000 ms)"
              f" {'OK' if fine else 'MISSED'}")  # fmt: skip
        ours_call, floor_call = await per_call(logs, calls, rounds)
        print(f"per call ({calls} calls x {rounds} rounds, medians): ours "
              f"{ours_call * 1e6:7.1f} us   SDK alone {floor_call * 1e6:7.1f} us   "
              f"ratio {ours_call / floor_call:.2f}x")  # fmt: skip
    return verdict(ok)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=sized(200, 3))
    parser.add_argument("--rounds", type=int, default=sized(5, 1))
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.calls, args.rounds)))
