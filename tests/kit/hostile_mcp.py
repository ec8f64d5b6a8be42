"""The hostile MCP server (``tests/mcp/servers/hostile_server.py``) and a watch on the
event loop, for the tests of issue 25's MCP attacks.

:class:`LoopWatch` is how a test in process sees that an attack did not freeze the
loop: a task that asks for a wake-up every few milliseconds and records how late each
came. A loop held by a check for seconds shows as a wake-up seconds late.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import time
from collections.abc import AsyncIterator

from .mcp import HttpServer, base_env
from .paths import MCP_SERVERS
from .wait import WAIT_S

HOSTILE_SERVER = MCP_SERVERS / "hostile_server.py"

FROZEN_S = 2.0
"""A wake-up later than this means the loop was frozen (the target is 100 ms; a busy
machine with every core taken by tests is allowed far more, an attack takes hours)."""


class LoopWatch:
    """Wake-ups every ``interval`` seconds while in use; ``worst`` is the latest one."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.worst = 0.0
        self.wakeups = 0
        self._task: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.worst = max(self.worst, time.perf_counter() - asked - self.interval)
            self.wakeups += 1

    async def __aenter__(self) -> LoopWatch:
        self._task = asyncio.get_running_loop().create_task(self._watch())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        await asyncio.sleep(self.interval * 3)  # at least one wake-up, however quick the work
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def assert_never_frozen(self) -> None:
        assert self.wakeups > 0, "the watch never woke up"
        assert self.worst < FROZEN_S, f"the event loop was held for {self.worst:.2f} s"


@contextlib.asynccontextmanager
async def hostile_http_server() -> AsyncIterator[HttpServer]:
    """The hostile server on streamable HTTP (JSON answers) at 127.0.0.1, on a port the
    OS picks; always stopped."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(HOSTILE_SERVER), "--http", "0",
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
                assert line, "the hostile HTTP server exited before listening"
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
