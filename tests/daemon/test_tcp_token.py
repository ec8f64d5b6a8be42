"""``serve --tcp``: where the token comes from (``--token-file``, ``CLEVERAGENTS_TOKEN``),
that it never reaches the log, and a half-closed client whose runs still end cleanly."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from cleveragents.client._connection import read_frame
from cleveragents.protocol import frame
from kit.models import HANG, HANG_TOOL
from kit.tcp import (
    TOKEN,
    TcpDaemon,
    close,
    closed_unanswered,
    initialize_message,
    initialized,
    read_token,
    serve_tcp,
)

Spawn = Callable[..., AbstractAsyncContextManager[TcpDaemon]]
MINE = "my-own-token-0123456789-0123456789-abcdef"


@pytest.fixture
def spawn(tmp_path: Path) -> Spawn:
    """``serve --tcp`` with extra arguments and environment (no CLEVERAGENTS_TOKEN unless
    given); the daemon is killed at the end if it is still running."""
    (tmp_path / "ws").mkdir()

    def start(*extra: str, token_env: str | None = None) -> Any:
        return serve_tcp(tmp_path, *extra, token_env=token_env)

    return start


async def _initialized(daemon: TcpDaemon, workspace: Path, token: str) -> Any:
    reader, writer, reply = await initialized(daemon, workspace, token)
    assert "result" in reply, reply
    return reader, writer


async def _shutdown_and_log(daemon: TcpDaemon, reader: Any, writer: Any) -> str:
    """End the session cleanly; returns everything the daemon logged."""
    writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    await read_frame(reader)
    writer.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    async with asyncio.timeout(10):
        assert await daemon.process.wait() == 0
    await close(writer)
    return await daemon.log()


async def test_a_missing_token_file_is_created_private_with_a_random_token(
    spawn: Spawn, tmp_path: Path
) -> None:
    token_file = tmp_path / "secrets" / "token"
    async with spawn("--token-file", str(token_file)) as daemon:
        reader, writer = await daemon.connect()  # listening: the token exists by now
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        writer.write(frame(initialize_message(tmp_path / "ws", token)))
        reply = await read_frame(reader)
        assert reply is not None
        assert "result" in reply
        log = await _shutdown_and_log(daemon, reader, writer)
    assert token not in log
    assert not (tmp_path / "state" / "tcp-token").exists()  # the file named was used


async def test_an_existing_token_file_is_used_and_left_as_it_was(
    spawn: Spawn, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{MINE}\n")
    token_file.chmod(0o600)
    async with spawn("--token-file", str(token_file)) as daemon:
        reader, writer = await daemon.connect()
        writer.write(frame(initialize_message(tmp_path / "ws", "another-token")))
        assert await closed_unanswered(reader) == b""
        await close(writer)
        reader, writer = await _initialized(daemon, tmp_path / "ws", MINE)
        log = await _shutdown_and_log(daemon, reader, writer)
    assert token_file.read_text() == f"{MINE}\n"
    assert MINE not in log


async def test_the_token_can_come_from_the_environment(spawn: Spawn, tmp_path: Path) -> None:
    async with spawn(token_env=TOKEN) as daemon:
        reader, writer = await _initialized(daemon, tmp_path / "ws", TOKEN)
        log = await _shutdown_and_log(daemon, reader, writer)
    assert TOKEN not in log
    assert not (tmp_path / "state" / "tcp-token").exists()  # nothing created


async def test_a_half_closed_client_gets_its_runs_ended_and_the_daemon_exits(
    spawn: Spawn, tmp_path: Path
) -> None:
    async with spawn() as daemon:
        reader, writer = await daemon.connect()
        token = await read_token(daemon)
        writer.write(frame(initialize_message(tmp_path / "ws", token)))
        assert await read_frame(reader) is not None
        writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/register",
                            "params": {"tools": [HANG_TOOL]}}))  # fmt: skip
        writer.write(frame({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                            "params": {"prompt": "go", "runId": "half", "model": HANG}}))  # fmt: skip
        received: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            while (message := await read_frame(reader)) is not None:
                if message.get("method") == "tools/call":
                    break
            writer.write_eof()  # SHUT_WR: nothing more to say, still reading
            while (message := await read_frame(reader)) is not None:
                received.append(message)
            assert await daemon.process.wait() == 0
        await close(writer)
        log = await daemon.log()
    finished = [m["params"]["result"] for m in received if m.get("method") == "run/finished"]
    assert [r["status"] for r in finished] == ["cancelled"]
    (reply,) = [m for m in received if m.get("id") == 3]
    assert reply["result"]["status"] == "cancelled"
    lines = (tmp_path / "state" / "runs" / "half.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["method"] == "run/finished"
    assert token not in log
