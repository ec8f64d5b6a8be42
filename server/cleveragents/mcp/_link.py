"""The seam between :class:`~cleveragents.mcp.McpServer` (asyncio, no SDK) and the
SDK-backed connection (``_connection``): what a connection is given, what it reports
back, and what a call returns.

Everything here is plain Python so that ``McpServer`` can be imported, configured and
reported on without the ``mcp`` SDK.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

import attrs

from cleveragents.tool import ToolCallContext

from ._config import McpServerConfig
from ._hooks import NO_HOOKS, ClientHooks
from ._logfile import ServerLog
from ._tokens import TokenStore

Era = Literal["handshake", "modern"]
"""``handshake``: ``initialize`` first (2025-11-25 and before); ``modern``: 2026-07-28."""

WireTool = dict[str, Any]
"""One entry of ``tools/list``, as on the wire (camelCase keys, no nulls)."""


@attrs.frozen
class RawResult:
    """A ``tools/call`` result as on the wire: ``structuredContent`` (``None`` when
    absent), the content blocks, and ``isError``."""

    structured: Any
    content: list[dict[str, Any]]
    is_error: bool


class AuthEvents(Protocol):
    """What the browser step of an authorization tells the server (and through it, the
    face that can open a browser)."""

    def authorizing(self, url: str | None) -> None:
        """``url``: the user must open it to sign in (status ``needsAuth``); ``None``: the
        sign-in is over (it succeeded or failed: the connection goes on and says)."""


@attrs.frozen
class AuthParams:
    """What an HTTP connection needs to authorize: where tokens are kept, and whom to
    tell of a sign-in."""

    store: TokenStore
    events: AuthEvents


@attrs.frozen
class ConnectParams:
    """What one connection attempt needs. ``env`` and ``cwd`` are already resolved;
    ``era`` is the remembered (or forced) protocol era, ``None`` to detect; ``forced``
    forbids falling back to the other era."""

    config: McpServerConfig
    env: Mapping[str, str]
    cwd: str | None
    log: ServerLog | None
    """The stderr log of a stdio server; ``None`` for HTTP."""
    era: Era | None
    forced: bool
    deadline: float
    """``time.monotonic()`` by which the server must be ready."""
    auth: AuthParams | None = None
    """OAuth for an HTTP server; ``None``: no authorization (a 401 is a failure)."""
    hooks: ClientHooks = NO_HOOKS
    """Who answers the server's elicitations and roots, and hears its progress."""


Progress = Callable[[float, "float | None", "str | None"], None]
"""``progress(progress, total, message)`` of one call, as the server reported it."""


class Link(Protocol):
    """A live connection, as the server's calls see it."""

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        call: ToolCallContext | None = None,
        progress: Progress | None = None,
    ) -> RawResult:
        """Run ``tools/call`` for ``call`` (the run's tool call, when there is one),
        reporting the server's progress to ``progress``. Raises ``ConnectionLost`` if the
        connection ends under it, ``McpToolError`` if the server refuses it."""
        ...

    async def roots_changed(self) -> None:
        """Send ``notifications/roots/list_changed`` (never raises)."""
        ...


class ConnectionEvents(Protocol):
    """What a connection reports to its server (all awaited on the event loop: the server
    builds the tools' specs, compiling their schemas, in a worker thread meanwhile)."""

    async def connected(
        self, link: Link, protocol_version: str, era: Era, tools: list[WireTool]
    ) -> None:
        """The handshake is done and the first listing is in: the server is ready."""

    async def tools_listed(self, tools: list[WireTool]) -> None:
        """A listing after ``notifications/tools/list_changed`` that differs from the last."""


RunConnection = Callable[[ConnectParams, ConnectionEvents], Awaitable[str]]
"""Connects, reports ``connected``, serves until the connection ends and returns why it
ended. Raises ``McpStartError`` when the server cannot be brought to ready."""
