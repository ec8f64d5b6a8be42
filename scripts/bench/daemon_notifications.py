"""Daemon notification rate against a bare asyncio JSON-RPC writer (goal: >= 0.5x).

Daemon side: ``python -m cleveragents serve`` with a scripted model whose one turn,
``{"content": "x", "toolCalls": [{"name": "nope", ...}]}``, repeats for ``--iterations``
iterations. ``nope`` is an unknown tool, so each iteration is a full loop iteration (model
call, a failed tool call, the records) and sends four notifications: run/messageDelta,
run/toolCallStarted, run/toolCall and run/iteration; plus run/started and run/finished.
The daemon also writes each of them to the run's transcript, as it always does. (With
this script nothing in a run suspends, so a whole run is one event-loop turn; it still
streams, because each notification goes to the pipe as soon as it is sent.)

Bare side: a minimal asyncio JSON-RPC writer (``_rpc.BARE_WRITER``, run with
``python -c``) that writes the very same notifications (captured from a warm-up daemon
run: same methods, same params, same order, same framing headers), serialising each one
with ``json.dumps`` as it sends it, with ``StreamWriter.write`` + ``drain``. It does no
other work: it is the floor of an asyncio notification stream.

Both streams are read by the same bare client (``_rpc.Peer``: its own framing reader over
the subprocess pipe, one ``json.loads`` per message, no pygls). The window timed is the
notification stream only, from receiving run/started to receiving run/finished; process
start and ``initialize`` are left out. Both servers stay up for all rounds; rounds are
interleaved (alternating which goes first), and the medians are reported.

    python scripts/bench/daemon_notifications.py [--iterations N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import _rpc
from _smoke import sized

TURN: dict[str, Any] = {"content": "x", "toolCalls": [{"name": "nope", "arguments": {}}]}


async def stream(
    peer: _rpc.Peer, method: str, params: Any, capture: list[list[Any]] | None = None
) -> tuple[int, float]:
    """Send one request and read the notifications it streams until its reply. Returns
    the notifications from run/started to run/finished (both counted) and the seconds
    between receiving those two."""

    async def read_all() -> tuple[int, float]:
        msg_id = peer.start_request(method, params)
        await peer.stdin.drain()
        count = 0
        started = finished = 0.0
        while True:
            message = await peer.read()
            name = message.get("method")
            if name is not None:
                if name == "run/started":
                    started = _rpc.now()
                    count = 0
                count += 1
                if name == "run/finished":
                    finished = _rpc.now()
                if capture is not None:
                    capture.append([name, message.get("params")])
            elif message.get("id") == msg_id:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                if not started or not finished:
                    raise RuntimeError("no run/started or run/finished seen")
                return count, finished - started

    return await asyncio.wait_for(read_all(), _rpc.TIMEOUT)


async def bench(iterations: int, rounds: int) -> float:
    run_params = {"prompt": "stream", "maxIterations": iterations}
    with _rpc.scratch() as tmp:
        workspace = tmp / "workspace"
        argv = _rpc.daemon_argv(tmp / "state")
        async with _rpc.spawned(argv, workspace, tmp / "d.err") as daemon:
            await _rpc.start_daemon_session(daemon, workspace, [TURN])
            captured: list[list[Any]] = []
            count, _ = await stream(daemon, "run/start", run_params, captured)  # warm-up
            stream_file = tmp / "stream.json"
            _rpc.write_json(stream_file, captured)
            sizes = [len(json.dumps({"method": m, "params": p})) for m, p in captured]
            argv = [_rpc.PYTHON, "-c", _rpc.BARE_WRITER, str(stream_file)]
            async with _rpc.spawned(argv, workspace, tmp / "b.err") as bare:
                await bare.request("initialize", {})
                await stream(bare, "go", {})  # warm-up
                rates: dict[str, list[float]] = {"daemon": [], "bare": []}
                cpu = {"daemon": 0.0, "bare": 0.0}
                for round_no in range(rounds):
                    order = [("daemon", daemon), ("bare", bare)]
                    if round_no % 2:
                        order.reverse()
                    for name, peer in order:
                        method, params = ("run/start", run_params) if peer is daemon else ("go", {})
                        cpu_before = _rpc.cpu_seconds(peer.process.pid)
                        n, seconds = await stream(peer, method, params)
                        cpu[name] += _rpc.cpu_seconds(peer.process.pid) - cpu_before
                        if n != count:
                            raise RuntimeError(f"{name}: {n} notifications, expected {count}")
                        rates[name].append((n - 1) / seconds)
    daemon_rate = _rpc.median(rates["daemon"])
    bare_rate = _rpc.median(rates["bare"])
    ratio = daemon_rate / bare_rate
    print(
        f"notifications per run: {count} ({iterations} iterations), median body "
        f"{_rpc.median(sizes):.0f} B, largest {max(sizes)} B (run/finished)"
    )
    for name, values in rates.items():
        print(
            f"{name:<7} {_rpc.median(values):9.0f} notifications/s"
            f"  (min {min(values):.0f}, max {max(values):.0f}, {len(values)} rounds)"
        )
    cpu_us = {name: seconds / (rounds * count) * 1e6 for name, seconds in cpu.items()}
    if cpu_us["bare"] > 0:
        print(
            f"server CPU per notification (whole request, /proc): daemon {cpu_us['daemon']:.1f} us,"
            f" bare {cpu_us['bare']:.1f} us; CPU ratio bare/daemon"
            f" {cpu_us['bare'] / cpu_us['daemon']:.2f}x"
        )
    print(f"ratio daemon/bare {ratio:.2f}x (goal >= 0.5x)")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=sized(2000, 5))
    parser.add_argument("--rounds", type=int, default=sized(15, 1))
    args = parser.parse_args()
    asyncio.run(bench(args.iterations, args.rounds))


if __name__ == "__main__":
    main()
