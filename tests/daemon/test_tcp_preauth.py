"""``serve --tcp`` before authentication, through the real daemon: one small frame, in
time, an ``initialize`` with a token of 32 characters or more; anything else is closed
unanswered, guesses wait longer each time, and a flood of such connections leaves the
authenticated client answered at once."""

from __future__ import annotations

import asyncio
import stat
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cleveragents.client._connection import read_frame
from cleveragents.protocol import frame
from kit.cli import cli
from kit.tcp import (
    TcpDaemon,
    close,
    closed_unanswered,
    initialize_message,
    initialized,
    read_token,
    serve_tcp,
)

PREAUTH_TIMEOUT_S = 5.0
"""The daemon's documented wait for a first frame (docs/daemon.md)."""
MAX_UNAUTHENTICATED = 16


@pytest.fixture
async def tcp_daemon(tmp_path: Path) -> AsyncIterator[TcpDaemon]:
    (tmp_path / "ws").mkdir()
    async with serve_tcp(tmp_path) as daemon:
        yield daemon


async def _list_tools(daemon: TcpDaemon, tmp_path: Path) -> list[str]:
    """The real client gets in with the generated token and is answered."""
    token = await read_token(daemon)
    reader, writer, reply = await initialized(daemon, tmp_path / "ws", token)
    assert "result" in reply, reply
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
    listed = await read_frame(reader)
    await close(writer)
    assert listed is not None
    return [tool["name"] for tool in listed["result"]["tools"]]


async def test_an_unauthenticated_frame_over_64_kib_is_closed_unread(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    reader, writer = await tcp_daemon.connect()
    writer.write(b"Content-Length: 1048576\r\n\r\n" + b" " * 1000)  # the body never comes
    assert await closed_unanswered(reader) == b""
    await close(writer)
    assert "builtin/shell" in await _list_tools(tcp_daemon, tmp_path)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "result": None},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}},
    ],
    ids=["reply", "notification", "request"],
)
async def test_a_first_message_that_is_not_initialize_is_closed_unanswered(
    tcp_daemon: TcpDaemon, message: dict[str, object]
) -> None:
    reader, writer = await tcp_daemon.connect()
    writer.write(frame(message))
    assert await closed_unanswered(reader) == b""
    await close(writer)


async def test_a_wrong_token_is_closed_unanswered_and_the_next_waits(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    reader, writer = await tcp_daemon.connect()
    writer.write(frame(initialize_message(tmp_path / "ws", "x" * 40)))
    assert await closed_unanswered(reader) == b""
    await close(writer)
    assert "builtin/shell" in await _list_tools(tcp_daemon, tmp_path)
    tcp_daemon.process.kill()
    await tcp_daemon.process.wait()
    log = await tcp_daemon.log()
    assert (
        "a wrong token (1 failed attempt from 127.0.0.1; the next is compared after 0.25 s)" in log
    )
    assert "x" * 40 not in log


async def test_a_silent_connection_is_closed_after_the_first_frame_timeout(
    tcp_daemon: TcpDaemon,
) -> None:
    reader, writer = await tcp_daemon.connect()
    writer.write(b"Content-Length: 100\r\n")  # a header begun, never ended
    started = time.monotonic()
    assert await closed_unanswered(reader, timeout=3 * PREAUTH_TIMEOUT_S) == b""
    assert time.monotonic() - started >= PREAUTH_TIMEOUT_S - 1.0  # not before its time
    await close(writer)


async def test_connections_waiting_to_authenticate_are_bounded(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    waiting = [await tcp_daemon.connect() for _ in range(MAX_UNAUTHENTICATED)]
    for _, writer in waiting:
        writer.write(b"Content-Length: 10\r\n")
        await writer.drain()
    # One more is closed at once, while those are still waiting for their frame.
    async with asyncio.timeout(PREAUTH_TIMEOUT_S - 1.0):
        while True:
            reader, writer = await tcp_daemon.connect()
            writer.write(b"Content-Length: 10\r\n")
            try:
                # Accepted connections may still be reaching the gate: retry until the
                # bound is reached (each retry's connection takes no place: it is closed).
                received = await closed_unanswered(reader, timeout=0.5)
            except TimeoutError:
                waiting.append((reader, writer))
                continue
            assert received == b""
            await close(writer)
            break
    assert len(waiting) == MAX_UNAUTHENTICATED
    assert not any(reader.at_eof() for reader, _ in waiting)
    for _, writer in waiting:
        await close(writer)
    assert "builtin/shell" in await _list_tools(tcp_daemon, tmp_path)


@pytest.mark.parametrize("where", ["environment", "token file"])
def test_a_token_under_32_characters_is_refused_at_start_up(tmp_path: Path, where: str) -> None:
    short = "0123456789abcdefghijklmnopqrstu"  # 31 characters
    args = ["serve", "--tcp", "127.0.0.1:0", "--state-dir", str(tmp_path / "state")]
    env = {}
    if where == "environment":
        env["CLEVERAGENTS_TOKEN"] = short
    else:
        token_file = tmp_path / "token"
        token_file.write_text(short + "\n")
        token_file.chmod(0o600)
        args += ["--token-file", str(token_file)]
    done = cli(tmp_path, *args, **env)
    assert done.returncode == 2
    assert "31 characters long; a --tcp token needs at least 32" in done.stderr
    assert "listening" not in done.stderr
    assert short not in done.stderr


async def test_a_generated_token_is_private_and_works_end_to_end(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    token_file = tcp_daemon.state / "tcp-token"
    assert stat.S_IMODE(tcp_daemon.state.stat().st_mode) == 0o700
    assert "builtin/shell" in await _list_tools(tcp_daemon, tmp_path)
    token = token_file.read_text().strip()
    assert len(token) >= 32
    tcp_daemon.process.kill()
    await tcp_daemon.process.wait()
    log = await tcp_daemon.log()
    assert f"created the TCP token file {token_file}" in log
    assert token not in log


FLOOD = r"""
import asyncio, json, sys

port = int(sys.argv[1])
# A valid JSON message that is not a request, 16 MiB of it: parsed and walked by a
# daemon that reads before it authenticates.
body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": [0] * (8 * 1024 * 1024)}).encode()
data = b"Content-Length: %d\r\n\r\n" % len(body) + body

async def one():
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            print("connected", flush=True)
            while True:
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            await asyncio.sleep(0.01)

async def main():
    await asyncio.gather(*(one() for _ in range(4)))

asyncio.run(main())
"""


@pytest.mark.timeout(120)
async def test_the_client_is_answered_at_once_while_unauthenticated_connections_flood(
    tcp_daemon: TcpDaemon, tmp_path: Path
) -> None:
    flood = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FLOOD, str(tcp_daemon.port),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert flood.stdout is not None
        async with asyncio.timeout(30):  # the flood is under way before the client comes
            await flood.stdout.readline()
        token = await read_token(tcp_daemon)
        reader, writer, reply = await initialized(tcp_daemon, tmp_path / "ws", token)
        assert "result" in reply, reply
        delays = []
        for probe in range(20):  # about 4 s: a daemon parsing the frames stalls ~1 s each
            started = time.perf_counter()
            writer.write(frame({"jsonrpc": "2.0", "id": 10 + probe, "method": "tools/list",
                                "params": {}}))  # fmt: skip
            async with asyncio.timeout(30):
                while (message := await read_frame(reader)) is not None:
                    if message.get("id") == 10 + probe:
                        break
            delays.append(time.perf_counter() - started)
            await asyncio.sleep(0.2)
        await close(writer)
    finally:
        flood.kill()
        await flood.wait()
    assert max(delays) <= 5.0, delays
    assert statistics.median(delays) <= 0.1, delays
