"""Cancel latency: from the client's cancel to the ``run/start`` reply (goal: < 200 ms).

A run waits on a client tool that never answers; the client then cancels, by
``run/cancel`` or by ``$/cancelRequest`` for the ``run/start`` request, and times how
long the reply takes. A wall-clock bound, so it is a benchmark and never a unit test.

    python scripts/bench/daemon_cancel.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _rpc import daemon_argv, median, scratch, spawned, start_daemon_session
from _smoke import sized

HANG_TOOL = {
    "name": "client/hang",
    "description": "Never answers.",
    "inputSchema": {"type": "object"},
    "annotations": {"readOnly": True},  # allowed unasked by the default profile
}
SCRIPT = [{"toolCalls": [{"name": "client/hang", "arguments": {}}]}]


async def one_round(rounds: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"run/cancel": [], "$/cancelRequest": []}
    with scratch() as root:
        async with spawned(daemon_argv(root / "state"), root, root / "stderr.log") as peer:
            await start_daemon_session(peer, root / "workspace", SCRIPT)
            await peer.request("tools/register", {"tools": [HANG_TOOL]})
            for index in range(rounds * 2):
                path = "run/cancel" if index % 2 == 0 else "$/cancelRequest"
                run_id = f"c{index}"
                start_id = peer.start_request("run/start", {"prompt": "go", "runId": run_id})
                await peer.stdin.drain()
                while (await asyncio.wait_for(peer.read(), 10)).get("method") != "tools/call":
                    pass
                started = time.perf_counter()
                if path == "run/cancel":
                    peer.start_request("run/cancel", {"runId": run_id})
                else:
                    peer.notify("$/cancelRequest", {"id": start_id})
                await peer.stdin.drain()
                while True:
                    message = await asyncio.wait_for(peer.read(), 10)
                    if message.get("id") == start_id and "method" not in message:
                        break
                timings[path].append(time.perf_counter() - started)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=sized(15, 1))
    args = parser.parse_args()
    timings = asyncio.run(one_round(args.rounds))
    for path, values in timings.items():
        print(
            f"{path:<16} median {median(values) * 1000:6.1f} ms   max {max(values) * 1000:6.1f} ms"
            f"   ({len(values)} cancels; goal < 200 ms)"
        )


if __name__ == "__main__":
    main()
