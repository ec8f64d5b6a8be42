"""``serve --tcp`` in tests: the daemon listens on a port it picks (``127.0.0.1:0``) and
names in its log, so parallel tests never race for a port. A connection that has not
authenticated is closed without a word (``closed_unanswered``), and a peer that sent a
wrong token waits a moment before its next one counts (``initialized`` retries)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cleveragents.client._connection import read_frame
from cleveragents.protocol import frame

from .wait import wait_for

LISTENING = re.compile(rb"cleveragents listening on 127\.0\.0\.1:(\d+)")


class TcpDaemon:
    def __init__(self, process: asyncio.subprocess.Process, state: Path) -> None:
        self.process = process
        self.state = state
        self.port = 0
        self._log: list[bytes] = []

    async def wait_listening(self) -> None:
        """Read the log until the daemon names its port (bounded)."""
        assert self.process.stderr is not None
        async with asyncio.timeout(10):
            while True:
                line = await self.process.stderr.readline()
                assert line, f"the daemon exited before listening: {b''.join(self._log)!r}"
                self._log.append(line)
                if found := LISTENING.search(line):
                    self.port = int(found.group(1))
                    return

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with asyncio.timeout(10):
            return await asyncio.open_connection("127.0.0.1", self.port)

    async def log(self) -> str:
        """Everything the daemon logged (call after it has exited)."""
        assert self.process.stderr is not None
        rest = await self.process.stderr.read()
        return (b"".join(self._log) + rest).decode()


@contextlib.asynccontextmanager
async def serve_tcp(
    tmp_path: Path, *extra: str, token_env: str | None = None
) -> AsyncIterator[TcpDaemon]:
    """``serve --tcp`` listening, with extra arguments and no CLEVERAGENTS_TOKEN in its
    environment unless ``token_env`` gives one; killed at the end if still running."""
    env = {k: v for k, v in os.environ.items() if k != "CLEVERAGENTS_TOKEN"}
    if token_env is not None:
        env["CLEVERAGENTS_TOKEN"] = token_env
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cleveragents", "serve", "--tcp", "127.0.0.1:0",
        "--state-dir", str(tmp_path / "state"), *extra, stderr=asyncio.subprocess.PIPE,
        env=env,
    )  # fmt: skip
    daemon = TcpDaemon(process, tmp_path / "state")
    try:
        await daemon.wait_listening()
        yield daemon
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def initialize_message(workspace: Path, token: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {"automationProfile": "trusted"}
    if token is not None:
        options["token"] = token
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
        "initializationOptions": options}}  # fmt: skip


async def read_token(daemon: TcpDaemon) -> str:
    """The token the daemon wrote to its state dir (checked private)."""
    path = daemon.state / "tcp-token"
    await wait_for(lambda: path.exists() and bool(path.read_text().strip()), 10, 0.02)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return path.read_text().strip()


TOKEN = "test-token-0123456789-abcdefghijklmnopqrstuvwxyz"
"""A token long enough for ``serve --tcp`` (32 characters at least)."""


async def closed_unanswered(reader: asyncio.StreamReader, timeout: float = 15.0) -> bytes:
    """Everything the daemon sent before it closed the connection (a reset counts as a
    close); ``TimeoutError`` if it is still open after ``timeout`` seconds."""
    received = b""
    async with asyncio.timeout(timeout):
        try:
            while chunk := await reader.read(65536):
                received += chunk
        except ConnectionError:
            pass
    return received


async def initialized(
    daemon: TcpDaemon, workspace: Path, token: str, timeout: float = 15.0
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, dict[str, Any]]:
    """A connection that sent ``initialize`` with ``token`` and got its reply; retried
    (bounded) while the daemon closes it unanswered, as it does while this peer waits
    after a wrong token."""
    async with asyncio.timeout(timeout):
        while True:
            reader, writer = await daemon.connect()
            writer.write(frame(initialize_message(workspace, token)))
            try:
                reply = await read_frame(reader)
            except ConnectionError:
                reply = None
            if reply is not None:
                return reader, writer, reply
            await close(writer)
            await asyncio.sleep(0.05)


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
