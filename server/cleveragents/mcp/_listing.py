"""A connected server's tool list: every page of ``tools/list``, and listing again when
the server says the list changed.

Changes arrive as ``notifications/tools/list_changed`` on the handshake era and through
a ``subscriptions/listen`` stream on 2026-07-28; both only request a refresh
(:class:`Refresh`), and one task lists again, so announcements that come together
coalesce into one listing: at most one listing is in flight and one pending. Listings
start at least ``LIST_REFRESH_INTERVAL_S`` apart, and a server whose list changes more
than ``LIST_CHANGES_PER_MINUTE`` times in a minute is flooding: the connection is dropped
with :class:`McpServerFault` (the server becomes ``failed`` saying so). A listing stops
at ``MAX_TOOLS`` tools.

It reports changed listings through ``ConnectionEvents`` and knows nothing of specs or
statuses. Imports the SDK: only ever loaded through ``_connection``.
"""

from __future__ import annotations

import collections
import logging
import math

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, listen
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ._errors import McpServerFault
from ._link import ConnectionEvents, ConnectParams, WireTool
from ._tools import MAX_TOOLS
from ._transport import describe

logger = logging.getLogger("cleveragents.mcp")

MAX_PAGES = 1000
"""A ``tools/list`` that pages on past this is cut off (a paginator that never ends)."""
REFRESH_WAIT_S = 10.0
"""How long a call that saw a change announced waits for the new list."""
LIST_REFRESH_INTERVAL_S = 0.25
"""The least time between the starts of two listings after change announcements."""
LIST_CHANGES_PER_MINUTE = 20
"""A server whose tool list changes more often than this in any minute is disconnected
and ``failed``: each change costs a listing and a compile of every new schema."""


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
        if len(tools) > MAX_TOOLS:
            logger.warning("tools/list went on past %d tools; listing stopped there", MAX_TOOLS)
            return tools[:MAX_TOOLS]
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
    listed: list[WireTool],
) -> None:
    """List again after each requested refresh (``listed`` is the listing the connection
    started with); report each listing that differs from the last. Raises
    ``McpServerFault`` when the list changes too often."""
    name = params.config.name
    changed_at: collections.deque[float] = collections.deque()
    started = -math.inf
    async for _ in changes:
        wait = started + LIST_REFRESH_INTERVAL_S - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)
        _drain(changes)  # what was announced while waiting, this listing covers
        refresh.begin()
        started = anyio.current_time()
        try:
            with anyio.fail_after(params.config.timeout_s):
                tools = await list_tools(session)
            if tools != listed:
                _count_change(name, changed_at)
                listed = tools
                await events.tools_listed(tools)
        except (MCPError, ValidationError, TimeoutError, RuntimeError) as exc:
            logger.warning(
                "MCP server %s: listing tools after a change failed: %s", name, describe(exc)
            )
        finally:
            refresh.end()


def _drain(changes: MemoryObjectReceiveStream[None]) -> None:
    while True:
        try:
            changes.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            return


def _count_change(name: str, changed_at: collections.deque[float]) -> None:
    now = anyio.current_time()
    changed_at.append(now)
    while changed_at and now - changed_at[0] > 60.0:
        changed_at.popleft()
    if len(changed_at) > LIST_CHANGES_PER_MINUTE:
        raise McpServerFault(
            f"it changed its tool list more than {LIST_CHANGES_PER_MINUTE} times in a "
            "minute (a flood of tools/list_changed); disconnected"
        )
