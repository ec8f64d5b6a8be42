"""Client-tool round trip through the daemon against a bare asyncio JSON-RPC round trip
(goal: within 2.5x).

Daemon side: ``python -m cleveragents serve``; the client registers a tool ``echo``
(``tools/register``, annotated read-only so the default profile runs it without asking)
and starts a run whose scripted model calls ``echo`` once per iteration for
``--iterations`` iterations. Each round trip the client sees is one full loop iteration
of the daemon: the model call, the tool call through the runner (validation, policy,
record), the ``tools/call`` request to the client and its reply, and three notifications
(run/toolCallStarted, run/toolCall, run/iteration), each also written to the transcript.
The client reads and parses those notifications too: they are part of the protocol.

Bare side: a minimal asyncio JSON-RPC server (``_rpc.BARE_REQUESTER``, run with
``python -c``) that sends the same ``tools/call`` request (the params captured from the
daemon: same size) ``--iterations`` times, one at a time, each awaiting its reply through
a future, and does nothing else: the floor of an asyncio request/reply over a pipe.

The client is the same for both (``_rpc.Peer``: a bare framing reader, no pygls) and
answers each ``tools/call`` at once with ``{"output": "ok"}``. A round trip is timed at
the client as the mean interval between receiving one ``tools/call`` and receiving the
next, over the whole run. Rounds are interleaved; medians are reported.

It also reports the daemon's iteration without the client hop (the model calls an unknown
tool instead: the same loop and notification count, no request), timed at the client
between consecutive run/iteration notifications, and so the cost of the hop itself.

    python scripts/bench/daemon_roundtrip.py [--iterations N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import _rpc
from _smoke import sized

ECHO: dict[str, Any] = {
    "name": "echo",
    "description": "Answers at once.",
    "inputSchema": {"type": "object"},
    "annotations": {"readOnly": True},
}


def model(tool: str) -> dict[str, Any]:
    return {"provider": "scripted", "script": [{"toolCalls": [{"name": tool, "arguments": {}}]}]}


async def serve(
    peer: _rpc.Peer, method: str, params: Any, capture: list[Any] | None = None
) -> tuple[list[float], list[float]]:
    """Send one request; answer every ``tools/call`` until its reply comes. Returns the
    times the ``tools/call`` requests and the run/iteration notifications arrived."""

    async def loop() -> tuple[list[float], list[float]]:
        msg_id = peer.start_request(method, params)
        await peer.stdin.drain()
        calls: list[float] = []
        iterations: list[float] = []
        while True:
            message = await peer.read()
            name = message.get("method")
            if name == "tools/call":
                calls.append(_rpc.now())
                peer.reply(message["id"], {"output": "ok"})
                if capture is not None:
                    capture.append(message["params"])
            elif name == "run/iteration":
                iterations.append(_rpc.now())
            elif name is None and message.get("id") == msg_id:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return calls, iterations

    return await asyncio.wait_for(loop(), _rpc.TIMEOUT)


def per_step(times: list[float], expected: int, what: str) -> float:
    if len(times) != expected:
        raise RuntimeError(f"{what}: {len(times)} events, expected {expected}")
    return (times[-1] - times[0]) / (len(times) - 1)


async def bench(iterations: int, rounds: int) -> float:
    hop_run = {"prompt": "echo", "maxIterations": iterations, "model": model("echo")}
    net_run = {"prompt": "nope", "maxIterations": iterations, "model": model("nope")}
    with _rpc.scratch() as tmp:
        workspace = tmp / "workspace"
        argv = _rpc.daemon_argv(tmp / "state")
        async with _rpc.spawned(argv, workspace, tmp / "d.err") as daemon:
            await _rpc.start_daemon_session(daemon, workspace, [{"content": "idle"}])
            await daemon.request("tools/register", {"tools": [ECHO]})
            captured: list[Any] = []
            await serve(daemon, "run/start", hop_run, captured)  # warm-up
            await serve(daemon, "run/start", net_run)  # warm-up
            go = {"n": iterations, "method": "tools/call", "params": captured[-1]}
            bare_argv = [_rpc.PYTHON, "-c", _rpc.BARE_REQUESTER]
            async with _rpc.spawned(bare_argv, workspace, tmp / "b.err") as bare:
                await bare.request("initialize", {})
                await serve(bare, "go", go)  # warm-up
                samples: dict[str, list[float]] = {"daemon": [], "bare": [], "net": []}
                cpu = {"daemon": 0.0, "bare": 0.0, "net": 0.0}
                for round_no in range(rounds):
                    order = ["daemon", "bare", "net"]
                    if round_no % 2:
                        order.reverse()
                    for name in order:
                        pid = (bare if name == "bare" else daemon).process.pid
                        cpu_before = _rpc.cpu_seconds(pid)
                        if name == "daemon":
                            calls, _ = await serve(daemon, "run/start", hop_run)
                            samples[name].append(per_step(calls, iterations, name))
                        elif name == "bare":
                            calls, _ = await serve(bare, "go", go)
                            samples[name].append(per_step(calls, iterations, name))
                        else:
                            _, ends = await serve(daemon, "run/start", net_run)
                            samples[name].append(per_step(ends, iterations, name))
                        cpu[name] += _rpc.cpu_seconds(pid) - cpu_before
    us = {name: _rpc.median(values) * 1e6 for name, values in samples.items()}
    ratio = us["daemon"] / us["bare"]
    print(f"{iterations} round trips per run, {rounds} rounds, medians")
    print(f"daemon  {us['daemon']:7.1f} us per client-tool round trip (a full loop iteration)")
    print(f"bare    {us['bare']:7.1f} us per asyncio JSON-RPC round trip")
    print(
        f"daemon iteration without the client hop {us['net']:7.1f} us;"
        f" so the hop itself costs {us['daemon'] - us['net']:7.1f} us"
    )
    cpu_us = {name: seconds / (rounds * iterations) * 1e6 for name, seconds in cpu.items()}
    if cpu_us["bare"] > 0:
        print(
            f"server CPU per round trip (whole request, /proc): daemon {cpu_us['daemon']:.1f} us,"
            f" bare {cpu_us['bare']:.1f} us ({cpu_us['daemon'] / cpu_us['bare']:.2f}x);"
            f" daemon without the hop {cpu_us['net']:.1f} us"
        )
    print(f"ratio daemon/bare {ratio:.2f}x (goal <= 2.5x)")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=sized(500, 5))
    parser.add_argument("--rounds", type=int, default=sized(15, 1))
    args = parser.parse_args()
    asyncio.run(bench(args.iterations, args.rounds))


if __name__ == "__main__":
    main()
