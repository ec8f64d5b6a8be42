"""``serve --tcp``: the token, one authenticated client, and clean ends on a reset."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import struct
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cleveragents.client._connection import frame, read_frame

HANG = {"provider": "scripted", "script": [
    {"content": "waiting", "toolCalls": [{"name": "client/hang", "arguments": {}}]}]}  # fmt: skip
TOOL = {"name": "client/hang", "description": "Never answers.", "inputSchema": {"type": "object"}}


class TcpDaemon:
    def __init__(self, process: asyncio.subprocess.Process, port: int, state: Path) -> None:
        self.process = process
        self.port = port
        self.state = state

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with asyncio.timeout(10):
            while True:  # wait for the listener (bounded by the timeout above)
                try:
                    return await asyncio.open_connection("127.0.0.1", self.port)
                except ConnectionRefusedError:
                    await asyncio.sleep(0.05)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
async def tcp_daemon(tmp_path: Path) -> AsyncIterator[TcpDaemon]:
    (tmp_path / "ws").mkdir()
    async with serve_tcp(tmp_path) as daemon:
        yield daemon


@contextlib.asynccontextmanager
async def serve_tcp(
    tmp_path: Path, *extra: str, token_env: str | None = None
) -> AsyncIterator[TcpDaemon]:
    """``serve --tcp`` on a free port with extra arguments, and no CLEVERAGENTS_TOKEN in its
    environment unless ``token_env`` gives one; killed at the end if still running."""
    env = {k: v for k, v in os.environ.items() if k != "CLEVERAGENTS_TOKEN"}
    if token_env is not None:
        env["CLEVERAGENTS_TOKEN"] = token_env
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cleveragents", "serve", "--tcp", f"127.0.0.1:{port}",
        "--state-dir", str(tmp_path / "state"), *extra, stderr=asyncio.subprocess.PIPE,
        env=env,
    )  # fmt: skip
    try:
        yield TcpDaemon(process, port, tmp_path / "state")
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def _initialize(workspace: Path, token: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {"automationProfile": "trusted"}
    if token is not None:
        options["token"] = token
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
        "initializationOptions": options}}  # fmt: skip


async def _token(daemon: TcpDaemon) -> str:
    path = daemon.state / "tcp-token"
    async with asyncio.timeout(10):
        while not path.exists() or not path.read_text().strip():  # noqa: ASYNC110 - another process writes it
            await asyncio.sleep(0.02)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return path.read_text().strip()


async def test_the_token_is_created_private_and_never_logged(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    reader, writer = await tcp_daemon.connect()
    token = await _token(tcp_daemon)
    writer.write(frame(_initialize(tmp_path / "ws", token)))
    reply = await read_frame(reader)
    assert reply is not None
    assert "result" in reply
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    await read_frame(reader)
    writer.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    async with asyncio.timeout(10):
        assert await tcp_daemon.process.wait() == 0
    await _close(writer)
    assert tcp_daemon.process.stderr is not None
    log = (await tcp_daemon.process.stderr.read()).decode()
    assert "tcp-token" in log
    assert token not in log


async def test_a_client_without_the_token_is_refused_and_the_daemon_keeps_listening(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    for attempt in (None, "wrong-token"):
        reader, writer = await tcp_daemon.connect()
        writer.write(frame(_initialize(tmp_path / "ws", attempt)))
        reply = await read_frame(reader)
        assert reply is not None
        assert reply["error"]["code"] == -32600
        async with asyncio.timeout(10):
            assert await reader.read() == b""  # the connection is closed
        await _close(writer)
    # A request before any initialize is refused the same way.
    reader, writer = await tcp_daemon.connect()
    writer.write(frame({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}))
    reply = await read_frame(reader)
    assert reply is not None
    assert reply["error"]["code"] == -32600
    await _close(writer)
    # The real client still gets in, and a second one is turned away.
    reader, writer = await tcp_daemon.connect()
    writer.write(frame(_initialize(tmp_path / "ws", await _token(tcp_daemon))))
    reply = await read_frame(reader)
    assert reply is not None
    assert reply["result"]["capabilities"]["experimental"]["cleveragents"]["protocolVersion"] == 1
    assert "textDocumentSync" not in reply["result"]["capabilities"]
    second_reader, second_writer = await tcp_daemon.connect()
    async with asyncio.timeout(10):
        assert await second_reader.read() == b""
    await _close(second_writer)
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
    listed = await read_frame(reader)
    assert listed is not None
    assert listed["id"] == 2
    await _close(writer)


async def test_a_reset_connection_cancels_its_runs_and_ends_the_daemon(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    reader, writer = await tcp_daemon.connect()
    writer.write(frame(_initialize(tmp_path / "ws", await _token(tcp_daemon))))
    assert await read_frame(reader) is not None
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/register",
                        "params": {"tools": [TOOL]}}))  # fmt: skip
    assert await read_frame(reader) is not None
    writer.write(frame({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                        "params": {"prompt": "go", "runId": "reset", "model": HANG}}))  # fmt: skip
    async with asyncio.timeout(10):
        while (message := await read_frame(reader)) is not None:
            if message.get("method") == "tools/call":
                break
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()  # RST, not FIN
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    async with asyncio.timeout(15):
        await tcp_daemon.process.wait()
    lines = (tcp_daemon.state / "runs" / "reset.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["method"] == "run/finished"
    assert last["params"]["result"]["status"] == "cancelled"
