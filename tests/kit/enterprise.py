"""The loopback enterprise IdP and ID-JAG-taking MCP server (``tests/mcp/servers/
enterprise_server.py``, SEP-990), started for a test and always stopped."""

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

ENTERPRISE_SERVER = MCP_SERVERS / "enterprise_server.py"
# The server's own constants (it is a script, not a module to import); the fake's
# self-test signs in with these, so a drift fails there.
IDP_CLIENT_ID = "idp-client"
IDP_SECRET = "idp-client-secret-0123456789"
MCP_CLIENT_ID = "mcp-client"
MCP_SECRET = "mcp-client-secret-0123456789"


class EnterpriseServer:
    """``url``: the MCP endpoint; ``base``: its origin, the authorization server's issuer;
    ``idp``: the IdP's issuer."""

    def __init__(self, process: asyncio.subprocess.Process, url: str, idp: str) -> None:
        self.process = process
        self.url = url
        self.base = url.removesuffix("/mcp")
        self.idp = idp

    def get(self, path: str) -> Any:
        """JSON from the MCP server's origin (``/stats``, ``/revoke``, metadata)."""
        with urllib.request.urlopen(self.base + path, timeout=10) as answer:
            return json.loads(answer.read())


@contextlib.asynccontextmanager
async def enterprise_server(*args: str) -> AsyncIterator[EnterpriseServer]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(ENTERPRISE_SERVER), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env=base_env(),
    )  # fmt: skip
    output = process.stdout
    assert output is not None
    said: list[bytes] = []
    drain: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(WAIT_S):
            while not (line := await output.readline()).startswith(b"listening on "):
                said.append(line)
                assert line, f"the enterprise test server exited: {b''.join(said)!r}"
        url, idp = line.decode().split()[-2:]

        async def read_on() -> None:
            """Its log goes on to the pipe: read it, so that the server never blocks."""
            while await output.read(65536):
                pass

        drain = asyncio.create_task(read_on())
        yield EnterpriseServer(process, url, idp)
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()
        if drain is not None:
            await drain
