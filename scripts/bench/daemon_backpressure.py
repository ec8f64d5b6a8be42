"""Memory under a client that never reads (goal: at most 64 MiB of growth in 60 s).

Starts the real daemon, starts a busy run (a scripted model that reads a 512 KiB file on
every iteration, so each iteration sends about 1 MiB of notifications), and then never
reads the daemon's stdout. Samples the daemon's RSS; the runs must stall on the full
pipe, not queue their output in memory.

    python scripts/bench/daemon_backpressure.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _smoke import SMOKE, verdict

GOAL_MIB = 64.0


def frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.0 if SMOKE else 60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        workspace = root / "ws"
        workspace.mkdir()
        (workspace / "big.txt").write_text(("x" * 1023 + "\n") * 512)
        script = [{"content": "again", "toolCalls": [
            {"name": "builtin/file-read", "arguments": {"path": "big.txt"}}]}]  # fmt: skip
        process = subprocess.Popen(
            [sys.executable, "-m", "cleveragents", "serve", "--state-dir", str(root / "state")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            options = {"automationProfile": "trusted"}
            process.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
                           "initializationOptions": options}}))  # fmt: skip
            process.stdin.flush()
            os.read(process.stdout.fileno(), 65536)  # the initialize reply; then never again
            time.sleep(0.5)
            start = rss_mib(process.pid)  # before the run: its whole ramp counts
            process.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "run/start",
                "params": {"prompt": "busy", "maxIterations": 1_000_000,
                           "model": {"provider": "scripted", "script": script}}}))  # fmt: skip
            process.stdin.flush()
            peak = start
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                time.sleep(0.5)
                peak = max(peak, rss_mib(process.pid))
        finally:
            process.kill()
            process.wait()
    growth = peak - start
    ok = growth <= GOAL_MIB
    print(json.dumps({"seconds": args.seconds, "rss_start_mib": round(start, 1),
                      "rss_peak_mib": round(peak, 1), "growth_mib": round(growth, 1),
                      "goal_mib": GOAL_MIB}))  # fmt: skip
    print(
        f"client that never reads, {args.seconds:.0f} s: RSS grew {growth:.1f} MiB "
        f"(goal <= {GOAL_MIB:.0f} MiB) {'OK' if ok else 'MISSED'}"
    )
    return verdict(ok)


if __name__ == "__main__":
    raise SystemExit(main())
