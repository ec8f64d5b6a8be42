"""Bare JSON-RPC helpers shared by the daemon benchmarks (``daemon_*.py``).

Everything here is the *client* side of a benchmark, and it is the same for the daemon
and for the bare peer it is compared with: LSP base framing (``Content-Length``) over a
subprocess pipe, read in large chunks and split into frames in one pass, one
``json.loads`` per message. No pygls on this side: the client can take about 150k small
notifications/s here, more than either server sends, so it is not what is measured.

It also spawns the servers (with a temporary state dir and workspace, killed by PID on
the way out, whatever happens) and holds the sources of the bare asyncio peers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

PYTHON = sys.executable
LIMIT = 64 * 1024 * 1024
CHUNK = 1 << 18
TIMEOUT = 30.0  # bound on every wait for a server
Message = dict[str, Any]

# -- framing -----------------------------------------------------------------------------


def frame(message: Message) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class Peer:
    """One spawned server seen from the bare client.

    Reads the pipe in large chunks and splits every complete frame out of the buffer
    at once, so the client costs about one ``json.loads`` per message and is not what
    limits the rates measured.
    """

    def __init__(self, process: asyncio.subprocess.Process, stderr_path: Path) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.stderr_path = stderr_path
        self._ids = 0
        self._buffer = bytearray()
        self._messages: deque[Message] = deque()

    async def read(self) -> Message:
        """The next message; raises ``EOFError`` when the server's output ends."""
        messages = self._messages
        while not messages:
            chunk = await self.stdout.read(CHUNK)
            if not chunk:
                raise EOFError(self.stderr_tail())
            self._buffer += chunk
            self._split()
        return messages.popleft()

    def _split(self) -> None:
        buffer = self._buffer
        append = self._messages.append
        pos = 0
        while True:
            end = buffer.find(b"\r\n\r\n", pos)
            if end < 0:
                break
            length = -1
            for line in bytes(buffer[pos:end]).split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length < 0:
                raise ValueError(f"frame without Content-Length: {bytes(buffer[pos:end])!r}")
            start = end + 4
            if len(buffer) < start + length:
                break
            append(json.loads(buffer[start : start + length]))
            pos = start + length
        if pos:
            del buffer[:pos]

    def send(self, message: Message) -> None:
        self.stdin.write(frame(message))

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def start_request(self, method: str, params: Any) -> int:
        self._ids += 1
        self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids

    def reply(self, msg_id: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    async def request(self, method: str, params: Any, timeout: float = TIMEOUT) -> Any:
        """Send a request and wait (bounded) for its reply; other messages are dropped."""
        msg_id = self.start_request(method, params)
        await self.stdin.drain()

        async def reply() -> Any:
            while True:
                message = await self.read()
                if message.get("id") == msg_id and "method" not in message:
                    if "error" in message:
                        raise RuntimeError(f"{method} failed: {message['error']}")
                    return message.get("result")

        return await asyncio.wait_for(reply(), timeout)

    def stderr_tail(self) -> str:
        try:
            text = self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text[-2000:]


async def kill(process: asyncio.subprocess.Process) -> None:
    """Kill one process we started, by its PID, and reap it (bounded)."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    with contextlib.suppress(TimeoutError, ProcessLookupError):
        await asyncio.wait_for(process.wait(), 5)


@contextlib.asynccontextmanager
async def spawned(argv: Sequence[str], cwd: Path, stderr_path: Path) -> AsyncIterator[Peer]:
    """A server subprocess on pipes; killed and reaped on exit, even on error."""
    with stderr_path.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            limit=LIMIT,
        )
    try:
        yield Peer(process, stderr_path)
    finally:
        await kill(process)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A temporary directory holding ``state/`` and ``workspace/``; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="ca-bench-") as tmp:
        root = Path(tmp)
        (root / "state").mkdir()
        (root / "workspace").mkdir()
        yield root


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def daemon_argv(state_dir: Path) -> list[str]:
    return [PYTHON, "-m", "cleveragents", "serve", "--state-dir", str(state_dir)]


def initialize_params(workspace: Path, script: list[Message] | None = None) -> Message:
    options: Message = {}
    if script is not None:
        options["model"] = {"provider": "scripted", "script": script}
    return {
        "processId": None,
        "rootUri": workspace.resolve().as_uri(),
        "capabilities": {},
        "initializationOptions": options,
    }


async def start_daemon_session(peer: Peer, workspace: Path, script: list[Message]) -> None:
    await peer.request("initialize", initialize_params(workspace, script))
    peer.notify("initialized", {})


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``; 0.0 elsewhere).
    Less sensitive to a busy machine than wall time: a second view of the same work."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def now() -> float:
    return time.perf_counter()


# -- the bare asyncio peers (run with ``python -c``) --------------------------------------
#
# Both read frames on the event loop with the same two StreamReader calls per message,
# and write with ``StreamWriter.write`` plus ``drain`` (backpressure), which is what a
# minimal asyncio JSON-RPC server does. Each serialises every message with ``json.dumps``
# when it sends it, and frames it with the same headers pygls writes.

BARE_COMMON = r"""
import asyncio, json, sys

HEADER = "Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"

async def streams():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return reader, writer

async def read(reader):
    header = await reader.readuntil(b"\r\n\r\n")
    length = -1
    for line in header.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return json.loads(await reader.readexactly(length))

async def send(writer, message):
    body = json.dumps(message)
    writer.write((HEADER % len(body) + body).encode("utf-8"))
    await writer.drain()
"""

BARE_WRITER = (
    BARE_COMMON
    + r"""
# Answers "initialize" with {} and, for each "go" request, writes the notifications
# stored in the file named by argv[1] ([method, params] pairs), then replies to "go".
async def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        stream = json.load(handle)
    reader, writer = await streams()
    while True:
        try:
            message = await read(reader)
        except asyncio.IncompleteReadError:
            return
        if message.get("method") == "go":
            for method, params in stream:
                await send(writer, {"jsonrpc": "2.0", "method": method, "params": params})
        if "id" in message:
            await send(writer, {"jsonrpc": "2.0", "id": message["id"], "result": {}})

asyncio.run(main())
"""
)

BARE_REQUESTER = (
    BARE_COMMON
    + r"""
# Answers "initialize" with {}; for each "go" request ({n, method, params}) it sends the
# request n times, one at a time, awaiting each reply, then replies to "go".
async def main():
    reader, writer = await streams()
    loop = asyncio.get_running_loop()
    pending = {}
    ids = iter(range(1, 1 << 62))

    async def go(msg_id, n, method, params):
        for _ in range(n):
            call_id = "bare-%d" % next(ids)
            future = pending[call_id] = loop.create_future()
            await send(writer, {"jsonrpc": "2.0", "id": call_id, "method": method,
                                "params": params})
            await asyncio.wait_for(future, 30)
        await send(writer, {"jsonrpc": "2.0", "id": msg_id, "result": {}})

    tasks = set()
    while True:
        try:
            message = await read(reader)
        except asyncio.IncompleteReadError:
            return
        if "method" not in message:
            future = pending.pop(message.get("id"), None)
            if future is not None and not future.done():
                future.set_result(message.get("result"))
        elif message["method"] == "go":
            p = message["params"]
            task = asyncio.ensure_future(go(message["id"], p["n"], p["method"], p["params"]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif "id" in message:
            await send(writer, {"jsonrpc": "2.0", "id": message["id"], "result": {}})

asyncio.run(main())
"""
)

BARE_PYGLS = "from pygls.lsp.server import LanguageServer\nLanguageServer('bare', '1').start_io()\n"
