"""A connected server's tool list: every page of ``tools/list``, and listing again when
the server says the list changed.

Changes arrive as ``notifications/tools/list_changed`` on the handshake era and through
a ``subscriptions/listen`` stream on 2026-07-28; both only request a refresh
(:class:`Refresh`), and one task lists again, so announcements that come together
coalesce into one listing. It reports new listings through ``ConnectionEvents`` and
knows nothing of specs or statuses. Imports the SDK: only ever loaded through
``_connection``.
"""

from __future__ import annotations

import logging

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, listen
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ._link import ConnectionEvents, ConnectParams, WireTool
from ._transport import describe

logger = logging.getLogger("cleveragents.mcp")

MAX_PAGES = 1000
"""A ``tools/list`` that pages on past this is cut off (a paginator that never ends)."""
REFRESH_WAIT_S = 10.0
"""How long a call that saw a change announced waits for the new list."""


async def list_tools(session: ClientSession) -> list[WireTool]:
    """Every page of ``tools/list``, as wire dicts."""
    tools: list[WireTool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools.extend(
            t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools
        )
        cursor = page.next_cursor
        if cursor is None:
            return tools
        if cursor in seen:
            logger.warning("tools/list repeated cursor %.100r; listing stopped there", cursor)
            return tools
        seen.add(cursor)
    logger.warning("tools/list went on past %d pages; listing stopped there", MAX_PAGES)
    return tools


class Refresh:
    """Tool-list changes announced and not yet listed again.

    A call during which the server announced a change returns only once the new list is
    in (at most ``REFRESH_WAIT_S``), so the run's next iteration sees it: servers
    announce a change as it happens, before the answer of the call that made it."""

    def __init__(self, changes: MemoryObjectSendStream[None]) -> None:
        self._changes = changes
        self.pending = False
        self.listing = False
        self._done = anyio.Event()

    def request(self) -> None:
        self.pending = True
        try:
            self._changes.send_nowait(None)
        except anyio.WouldBlock:  # a refresh is already pending: they coalesce
            pass
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.pending = False

    def begin(self) -> None:
        self.pending, self.listing = False, True

    def end(self) -> None:
        self.listing = False
        if not self.pending:
            self._done.set()
            self._done = anyio.Event()

    async def settled(self) -> None:
        with anyio.move_on_after(REFRESH_WAIT_S):
            while self.pending or self.listing:
                await self._done.wait()


def message_handler(name: str, refresh: Refresh) -> MessageHandlerFnT:
    """The session's handler of what the server sends unasked: list changes and
    transport errors."""

    async def handle(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            refresh.request()
        elif isinstance(message, Exception):
            logger.warning("MCP server %s: transport error: %s", name, describe(message))

    return handle


def announces_list_changes(session: ClientSession) -> bool:
    capabilities = session.server_capabilities
    return bool(capabilities and capabilities.tools and capabilities.tools.list_changed)


async def listen_for_changes(session: ClientSession, name: str, refresh: Refresh) -> None:
    """2026-07-28: tool-list changes come on a ``subscriptions/listen`` stream."""
    try:
        async with listen(session, tools_list_changed=True) as subscription:
            async for _event in subscription:
                refresh.request()
    except (MCPError, SubscriptionLost, ListenNotSupportedError, TimeoutError) as exc:
        logger.info(
            "MCP server %s: no tool-list changes: subscriptions/listen ended (%s)", name, exc
        )


async def refresh_on_change(
    session: ClientSession,
    params: ConnectParams,
    events: ConnectionEvents,
    changes: MemoryObjectReceiveStream[None],
    refresh: Refresh,
) -> None:
    """List again after each requested refresh; report each new listing."""
    name = params.config.name
    async for _ in changes:
        refresh.begin()
        try:
            with anyio.fail_after(params.config.timeout_s):
                tools = await list_tools(session)
        except (MCPError, ValidationError, TimeoutError, RuntimeError) as exc:
            logger.warning(
                "MCP server %s: listing tools after a change failed: %s", name, describe(exc)
            )
        else:
            events.tools_listed(tools)
        finally:
            refresh.end()
