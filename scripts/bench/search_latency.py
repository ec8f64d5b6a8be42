"""Request latency while hostile searches run (goal: no request waits > 100 ms).

The real daemon runs one scripted run whose model calls, one after the other:
``file-search`` with ``(a+)+$`` and a 12-star glob over files of long ``aaaa…!`` lines
named by long runs of ``a``; ``file-list`` with the 12-star pattern; and ``file-search``
with a pattern that drives RE2 onto its slower engine over lines of random ``a``/``b``.
The workspace's ``.gitignore`` holds a 12-star line and one too long to match safely.
Meanwhile the client sends ``tools/list`` every few milliseconds, one at a time, and
times each reply (the goal is in ``docs/security.md`` §2.1). A wall-clock figure, so a
benchmark and never a unit test.

    python scripts/bench/search_latency.py [--interval-ms N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _rpc import Peer, daemon_argv, median, scratch, spawned, start_daemon_session
from _smoke import sized

GOAL_MS = 100.0
TWELVE_STARS = "*a" * 11 + "*b"  # *a*a*a*a*a*a*a*a*a*a*a*b
SLOW_FOR_RE2 = "(?:[ab]*a[ab]{18}){3}c"  # a large DFA: RE2 falls back to its NFA
SCRIPT: list[dict[str, Any]] = [
    {"toolCalls": [{"name": "builtin/file-search",
                    "arguments": {"pattern": "(a+)+$", "glob": TWELVE_STARS}}]},
    {"toolCalls": [{"name": "builtin/file-list", "arguments": {"pattern": "**/" + TWELVE_STARS}}]},
    {"toolCalls": [{"name": "builtin/file-search",
                    "arguments": {"pattern": SLOW_FOR_RE2, "path": "ab"}}]},
    {"content": "done"},
]  # fmt: skip


def build_workspace(root: Path) -> None:
    """Long ``a…!`` lines in files with long names, random ``ab`` lines, a hostile .gitignore."""
    (root / ".gitignore").write_text(f"{TWELVE_STARS}x\n{'*a' * 600}b\n*.log\n")
    line = b"a" * 2000 + b"!\n"
    for index in range(sized(40, 2)):  # names of 40+ characters, half of them matching the glob
        name = "a" * (40 + index) + ("b" if index % 2 else "")
        (root / name).write_bytes(line * sized(1000, 10))  # 2 MB of pathological lines each
    names = root / "names"
    names.mkdir()
    for index in range(sized(2000, 20)):
        (names / ("a" * (40 + index % 200) + str(index))).write_text("")
    (root / "ab").mkdir()
    rng = random.Random(0)
    for index in range(sized(4, 1)):
        text = bytes(rng.choices(b"ab", k=sized(1_000_000, 1000)))
        (root / "ab" / f"ab{index}.txt").write_bytes(text + b"\n")


async def measure(interval_s: float) -> tuple[list[float], float, dict[str, Any]]:
    with scratch() as root:
        build_workspace(root / "workspace")
        async with spawned(daemon_argv(root / "state"), root, root / "stderr.log") as peer:
            await start_daemon_session(peer, root / "workspace", SCRIPT)
            return await probe(peer, interval_s)


async def probe(peer: Peer, interval_s: float) -> tuple[list[float], float, dict[str, Any]]:
    """Run the script; time ``tools/list`` round trips until the run ends."""
    loop = asyncio.get_running_loop()
    replies: dict[int, asyncio.Future[Any]] = {}
    records: list[dict[str, Any]] = []

    async def reader() -> None:
        while True:
            message = await peer.read()
            if message.get("method") == "run/toolCall":
                records.append(message["params"])
            elif "method" not in message and message.get("id") in replies:
                replies.pop(message["id"]).set_result(message)

    def send(method: str, params: Any) -> asyncio.Future[Any]:
        msg_id = peer.start_request(method, params)
        replies[msg_id] = loop.create_future()
        return replies[msg_id]

    reading = asyncio.ensure_future(reader())
    latencies: list[float] = []
    try:
        started = time.perf_counter()
        run = send("run/start", {"prompt": "go", "runId": "hostile"})
        await peer.stdin.drain()
        async with asyncio.timeout(300):
            while not run.done():
                sent = time.perf_counter()
                listed = send("tools/list", {})
                await peer.stdin.drain()
                await listed
                latencies.append(time.perf_counter() - sent)
                await asyncio.sleep(interval_s)  # pacing of the probe, not synchronisation
            result = run.result()
        elapsed = time.perf_counter() - started
    finally:
        reading.cancel()
    if "error" in result:
        raise RuntimeError(f"run/start failed: {result['error']}")
    return latencies, elapsed, {"records": records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval-ms", type=float, default=5.0)
    args = parser.parse_args()
    latencies, elapsed, seen = asyncio.run(measure(args.interval_ms / 1000))
    for params in seen["records"]:
        record = params.get("record", params)
        output = record.get("output") or {}
        found = len(output.get("matches", output.get("entries", [])))
        status = f"{found} found" if record.get("success") else f"failed: {record.get('error')}"
        note = "; note: " + output["note"][:60] + "..." if output.get("note") else ""
        print(f"  {record.get('toolName')}: {record.get('durationMs', 0):.0f} ms, {status}{note}")
    worst = max(latencies) * 1000
    print(
        f"tools/list during hostile searches: median {median(latencies) * 1000:.1f} ms, "
        f"worst {worst:.1f} ms over {len(latencies)} requests in {elapsed:.1f} s "
        f"(goal: worst <= {GOAL_MS:.0f} ms){'' if worst <= GOAL_MS else '  !! over the goal'}"
    )


if __name__ == "__main__":
    main()
