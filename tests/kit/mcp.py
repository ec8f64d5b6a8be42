"""Helpers for the MCP client tests: the test servers, their configs, and starting an
``McpServer`` that is always stopped again (with its process group)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from cleveragents.mcp import McpServer, McpServerConfig

from .paths import SDK_SERVER
from .wait import WAIT_S


def base_env() -> dict[str, str]:
    """What the daemon would pass: an allow-list, here just ``PATH``."""
    return {"PATH": os.environ.get("PATH", os.defpath)}


def stdio(name: str, script: Path, *args: str, **fields: Any) -> McpServerConfig:
    """A stdio server running ``script``. Unless a test sets it, the startup timeout is
    ``WAIT_S``, as long as ``started`` waits: the SDK server's imports alone take over a
    second of CPU, and the default 10 s was seen to run out with every core busy."""
    fields.setdefault("startup_timeout_s", WAIT_S)
    return McpServerConfig(name, command=sys.executable, args=(str(script), *args), **fields)


def make_server(
    config: McpServerConfig,
    tmp_path: Path,
    *,
    on_tools_changed: Callable[[McpServer], None] | None = None,
    base: dict[str, str] | None = None,
) -> McpServer:
    return McpServer(
        config,
        scope="daemon",
        log_dir=tmp_path / "logs",
        base_env=base_env() if base is None else base,
        default_cwd=str(tmp_path),
        on_tools_changed=on_tools_changed,
    )


@contextlib.asynccontextmanager
async def started(
    config: McpServerConfig,
    tmp_path: Path,
    *,
    on_tools_changed: Callable[[McpServer], None] | None = None,
    base: dict[str, str] | None = None,
) -> AsyncIterator[McpServer]:
    """Start a server, wait until it is no longer starting, and always stop it."""
    server = make_server(config, tmp_path, on_tools_changed=on_tools_changed, base=base)
    server.start()
    try:
        await server.wait_ready(WAIT_S)
        yield server
    finally:
        await server.stop()


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


class HttpServer:
    """The SDK test server on streamable HTTP at 127.0.0.1, on a port the OS picks."""

    def __init__(self, process: asyncio.subprocess.Process, url: str) -> None:
        self.process = process
        self.url = url
        assert process.stdout is not None
        self._drain = asyncio.create_task(_drain(process.stdout))

    async def stop(self) -> None:
        """End the server process (idempotent, bounded)."""
        if self.process.returncode is None:
            self.process.terminate()
        try:
            async with asyncio.timeout(WAIT_S):
                await self.process.wait()
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        await self._drain


@contextlib.asynccontextmanager
async def http_server(tmp_path: Path) -> AsyncIterator[HttpServer]:
    """Start the HTTP test server and yield it once it says it listens (read from its
    log, bounded); always stop it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SDK_SERVER), "--http", "0", "--marker-dir", str(tmp_path),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=base_env(),
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(WAIT_S):
            while True:
                line = await process.stdout.readline()
                assert line, "the HTTP test server exited before listening"
                found = re.search(rb"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
                if found:
                    break
    except BaseException:
        process.kill()
        await process.wait()
        raise
    server = HttpServer(process, found.group(1).decode() + "/mcp")
    try:
        yield server
    finally:
        await server.stop()


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass
