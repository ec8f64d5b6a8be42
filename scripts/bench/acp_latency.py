"""ACP latency, in one run: ``session/new`` latency, and ``session/prompt`` to the first
``session/update``, against our own protocol's ``run/start`` to ``run/started``; and
``session/cancel`` during a running shell command to the prompt's ``cancelled`` answer
(goal: within 200 ms).

Both faces are the real ``cleveragents serve`` subprocess with the same scripted model
(one text turn); medians over ROUNDS sequential requests after a warm-up.

    python scripts/bench/acp_latency.py [ROUNDS]
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rpc import PYTHON, Peer, daemon_argv, kill, median, scratch, start_daemon_session
from _smoke import sized

SCRIPT = [{"content": "ok"}]


class Lines:
    """A minimal newline-delimited JSON-RPC client."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = 0

    def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")

    def start(self, method: str, params: Any) -> int:
        self.ids += 1
        self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        return self.ids

    async def read(self) -> Any:
        assert self.process.stdout is not None
        return json.loads(await self.process.stdout.readline())

    async def until(self, predicate: Any) -> Any:
        while True:
            message = await self.read()
            if predicate(message):
                return message


async def acp_rounds(root: Path, rounds: int) -> tuple[list[float], list[float]]:
    argv = [
        PYTHON, "-m", "cleveragents", "serve", "--protocol", "acp", "--profile", "full-auto",
        "--model", json.dumps({"provider": "scripted", "script": SCRIPT}),
        "--state-dir", str(root / "state-acp"),
    ]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, limit=64 << 20,
    )  # fmt: skip
    client = Lines(process)
    news, firsts = [], []
    try:
        msg_id = client.start("initialize", {"protocolVersion": 1})
        await client.until(lambda m: m.get("id") == msg_id)
        for index in range(rounds + 3):
            started = time.perf_counter()
            msg_id = client.start("session/new", {"cwd": str(root / "workspace"), "mcpServers": []})
            reply = await client.until(lambda m, i=msg_id: m.get("id") == i)
            new_s = time.perf_counter() - started
            session = reply["result"]["sessionId"]
            started = time.perf_counter()
            msg_id = client.start(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
            )
            await client.until(lambda m: m.get("method") == "session/update")
            first_s = time.perf_counter() - started
            await client.until(lambda m, i=msg_id: m.get("id") == i)
            if index >= 3:  # warm-up
                news.append(new_s)
                firsts.append(first_s)
    finally:
        await kill(process)
    return news, firsts


CANCEL_GOAL_S = 0.2
SLOW = [{"toolCalls": [{"name": "builtin/shell", "arguments": {"command": "sleep 20"}}]},
        {"content": "never"}]  # fmt: skip


async def cancel_rounds(root: Path, rounds: int) -> list[float]:
    """``session/cancel`` while the shell runs -> the ``session/prompt`` answer."""
    argv = [
        PYTHON, "-m", "cleveragents", "serve", "--protocol", "acp", "--profile", "full-auto",
        "--model", json.dumps({"provider": "scripted", "script": SLOW}),
        "--state-dir", str(root / "state-cancel"),
    ]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, limit=64 << 20,
    )  # fmt: skip
    client = Lines(process)
    out = []
    try:
        msg_id = client.start("initialize", {"protocolVersion": 1})
        await client.until(lambda m: m.get("id") == msg_id)
        for _ in range(rounds):
            msg_id = client.start("session/new", {"cwd": str(root / "workspace"), "mcpServers": []})
            session = (await client.until(lambda m, i=msg_id: m.get("id") == i))["result"]
            session_id = session["sessionId"]
            msg_id = client.start(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]},
            )
            await client.until(
                lambda m: (
                    m.get("method") == "session/update"
                    and m["params"]["update"].get("status") == "in_progress"
                )
            )
            started = time.perf_counter()
            client.send({"jsonrpc": "2.0", "method": "session/cancel",
                         "params": {"sessionId": session_id}})  # fmt: skip
            reply = await client.until(lambda m, i=msg_id: m.get("id") == i)
            out.append(time.perf_counter() - started)
            assert reply["result"]["stopReason"] == "cancelled", reply
    finally:
        await kill(process)
    return out


async def lsp_rounds(root: Path, rounds: int) -> list[float]:
    process = await asyncio.create_subprocess_exec(
        *daemon_argv(root / "state-lsp"), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, limit=64 << 20,
    )  # fmt: skip
    peer = Peer(process, root / "lsp.stderr")
    out = []
    try:
        await start_daemon_session(peer, root / "workspace", SCRIPT)
        for index in range(rounds + 3):
            started = time.perf_counter()
            msg_id = peer.start_request("run/start", {"prompt": "hi"})
            while True:
                message = await peer.read()
                if message.get("method") == "run/started":
                    elapsed = time.perf_counter() - started
                if message.get("id") == msg_id:
                    break
            if index >= 3:
                out.append(elapsed)
    finally:
        await kill(process)
    return out


async def main(rounds: int) -> None:
    with scratch() as root:
        news, firsts = await acp_rounds(root, rounds)
        lsp = await lsp_rounds(root, rounds)
        cancels = await cancel_rounds(root, sized(10, 1))
    ms = 1000.0
    print(f"ACP session/new latency (median of {rounds}):            {median(news) * ms:7.2f} ms")
    print(f"ACP session/prompt -> first session/update (median):  {median(firsts) * ms:7.2f} ms")
    print(f"LSP run/start -> run/started (median):                {median(lsp) * ms:7.2f} ms")
    print(f"ratio ACP first update / LSP run/started: {median(firsts) / median(lsp):7.2f}x")
    worst = max(cancels)
    print(f"ACP session/cancel mid-shell -> cancelled answer: median {median(cancels) * ms:.1f} ms,"
          f" worst {worst * ms:.1f} ms of {len(cancels)} (goal <= {CANCEL_GOAL_S * ms:.0f} ms)"
          f" {'OK' if worst <= CANCEL_GOAL_S else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else sized(50, 1)))
