"""``serve --tcp``: the token, one authenticated client, and clean ends on a reset."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cleveragents.client._connection import frame, read_frame
from kit.models import HANG, HANG_TOOL
from kit.tcp import (
    TcpDaemon,
    close,
    closed_unanswered,
    initialize_message,
    initialized,
    read_token,
    serve_tcp,
)


@pytest.fixture
async def tcp_daemon(tmp_path: Path) -> AsyncIterator[TcpDaemon]:
    (tmp_path / "ws").mkdir()
    async with serve_tcp(tmp_path) as daemon:
        yield daemon


async def test_the_token_is_created_private_and_never_logged(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    reader, writer = await tcp_daemon.connect()
    token = await read_token(tcp_daemon)
    writer.write(frame(initialize_message(tmp_path / "ws", token)))
    reply = await read_frame(reader)
    assert reply is not None
    assert "result" in reply
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    await read_frame(reader)
    writer.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    async with asyncio.timeout(10):
        assert await tcp_daemon.process.wait() == 0
    await close(writer)
    log = await tcp_daemon.log()
    assert "tcp-token" in log
    assert token not in log


async def test_a_client_without_the_token_is_closed_unanswered_and_the_daemon_keeps_listening(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    for attempt in (None, "wrong-token"):
        reader, writer = await tcp_daemon.connect()
        writer.write(frame(initialize_message(tmp_path / "ws", attempt)))
        assert await closed_unanswered(reader) == b""
        await close(writer)
    # A request before any initialize is closed the same way.
    reader, writer = await tcp_daemon.connect()
    writer.write(frame({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}))
    assert await closed_unanswered(reader) == b""
    await close(writer)
    # The real client still gets in (once its address has waited out the failures), and
    # a second one is turned away.
    token = await read_token(tcp_daemon)
    reader, writer, reply = await initialized(tcp_daemon, tmp_path / "ws", token)
    assert reply["result"]["capabilities"]["experimental"]["cleveragents"]["protocolVersion"] == 1
    assert "textDocumentSync" not in reply["result"]["capabilities"]
    second_reader, second_writer = await tcp_daemon.connect()
    assert await closed_unanswered(second_reader) == b""
    await close(second_writer)
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
    listed = await read_frame(reader)
    assert listed is not None
    assert listed["id"] == 2
    await close(writer)


async def test_a_reset_connection_cancels_its_runs_and_ends_the_daemon(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    reader, writer = await tcp_daemon.connect()
    writer.write(frame(initialize_message(tmp_path / "ws", await read_token(tcp_daemon))))
    assert await read_frame(reader) is not None
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/register",
                        "params": {"tools": [HANG_TOOL]}}))  # fmt: skip
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
