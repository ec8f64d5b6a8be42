"""The loopback MCP server with its own authorization server (``tests/mcp/servers/
oauth_server.py``), started for a test and always stopped, and a browser's visit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

from .mcp import base_env
from .paths import MCP_SERVERS
from .wait import WAIT_S

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
