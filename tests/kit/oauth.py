"""The loopback MCP server with its own authorization server (``tests/mcp/servers/
oauth_server.py``), started for a test and always stopped, and a browser's visit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import urllib.request
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .mcp import base_env
from .paths import MCP_SERVERS
from .wait import WAIT_S

if TYPE_CHECKING:
    from cleveragents.mcp import McpServer

OAUTH_SERVER = MCP_SERVERS / "oauth_server.py"
PRE_SECRET = "pre-registered-client-secret-0123456789"


class AuthServer:
    def __init__(self, process: asyncio.subprocess.Process, url: str) -> None:
        self.process = process
        self.url = url
        self.base = url.removesuffix("/mcp")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=10) as answer:
            return json.loads(answer.read())


@contextlib.asynccontextmanager
async def auth_server(*args: str) -> AsyncIterator[AuthServer]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(OAUTH_SERVER), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env=base_env(),
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(WAIT_S):
            while not (line := await process.stdout.readline()).startswith(b"listening on "):
                assert line, "the OAuth test server exited before listening"
        yield AuthServer(process, line.split()[-1].decode())
    finally:
        process.terminate()
        await process.wait()


def browse(url: str) -> None:
    """A browser: GET the sign-in page and follow its redirects to the callback."""
    with urllib.request.urlopen(url, timeout=10) as page:
        page.read()


class Browser:
    """An ``McpServer``'s ``on_authorize``: opens each sign-in URL (unless told not to),
    as the person's browser would, and keeps them."""

    def __init__(self, opens: bool = True) -> None:
        self.opens = opens
        self.urls: list[str] = []
        self.tasks: set[asyncio.Future[None]] = set()

    def __call__(self, server: McpServer) -> None:
        assert server.status == "needsAuth"
        assert server.authorization_url is not None
        self.urls.append(server.authorization_url)
        if self.opens:
            task = asyncio.ensure_future(asyncio.to_thread(browse, server.authorization_url))
            self.tasks.add(task)
