"""One connection to an MCP server through the official SDK: transport, protocol
version, tool listing, calls and change notifications.

Owns the protocol-version policy. The SDK's ``mode="auto"`` probes ``server/discover``
first and waits 10 s on a server that ignores it; instead the handshake era is tried
first (``initialize``, which nearly every deployed server speaks, so it costs one round
trip) and only a server that refuses ``initialize`` is asked ``server/discover``
(2026-07-28). The era that worked is remembered by the caller and tried first next time;
``config.protocol`` forces one and forbids the fallback.

It also owns the SDK's sharp edges: the session's own output-schema check is turned off
(a ``structuredContent`` that misses its schema is still a good answer; ``McpServer``
logs it), and list changes arrive as ``notifications/tools/list_changed`` on the
handshake era and through a ``subscriptions/listen`` stream on 2026-07-28.

It does not know statuses, restarts or timeouts of calls: ``McpServer`` does. Importing
this module imports the SDK; ``McpServer`` loads it lazily through ``_sdk``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, listen
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from cleveragents import __version__

from ._errors import ConnectionLost, McpStartError, McpToolError
from ._link import ConnectionEvents, ConnectParams, Era, RawResult, WireTool
from ._stdio import stdio_channel

logger = logging.getLogger("cleveragents.mcp")

CLIENT_INFO = types.Implementation(name="cleveragents", version=__version__)
MAX_PAGES = 1000
"""A ``tools/list`` that pages on past this is cut off (a paginator that never ends)."""
REFUSED_HANDSHAKE = frozenset(
    {types.METHOD_NOT_FOUND, types.UNSUPPORTED_PROTOCOL_VERSION, types.INVALID_REQUEST}
)
"""Answers to ``initialize`` that mean "not this era": try 2026-07-28 instead."""
EXPECTED_FAILURES = (httpx2.HTTPError, OSError, MCPError, anyio.BrokenResourceError)
"""Failures of a transport that are the server's or the network's, not ours: reported
in ``error`` without a traceback in the log."""


class _Session(ClientSession):
    """A ``ClientSession`` that never fails a call over its ``outputSchema``."""

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        # The SDK raises RuntimeError on a mismatch (and may list tools to find the
        # schema); a mismatching answer is still the server's answer.
        return None


class _Ends:
    """How the current connection can end: ``closed`` is set when the transport is over."""

    def __init__(self) -> None:
        self.closed = anyio.Event()
        self.why = "the connection to the server was closed"
        self.connected = False
        self.watched = False
        """Whether a watcher (the stdio channel's) sets ``closed`` with its reason; an
        HTTP connection learns it is over only from a call that finds it closed."""

    def lost(self) -> None:
        if not self.watched:
            self.closed.set()


async def run(params: ConnectParams, events: ConnectionEvents) -> str:
    """Connect, report ``connected``, serve until the connection ends; return why it ended.

    Raises ``McpStartError`` (with the reason in words) when the server cannot be made
    ready before ``params.deadline``."""
    ends = _Ends()
    try:
        await _serve(params, events, ends)
    except Exception as exc:  # the transport's task groups wrap what failed in them
        leaf = _leaf(exc)
        if isinstance(leaf, McpStartError):
            raise leaf from None
        if not isinstance(leaf, EXPECTED_FAILURES):
            logger.warning("MCP server %s: connection failed", params.config.name, exc_info=exc)
        if not ends.connected:
            raise McpStartError(f"cannot connect: {_describe(leaf)}") from None
        return f"the connection failed: {_describe(leaf)}"
    return ends.why


async def _serve(params: ConnectParams, events: ConnectionEvents, ends: _Ends) -> None:
    async with AsyncExitStack() as stack:
        read, write = await _open_transport(stack, params, ends)
        changes_in, changes_out = anyio.create_memory_object_stream[None](1)
        stack.callback(changes_in.close)
        stack.callback(changes_out.close)
        refresh = _Refresh(changes_in)
        session = await stack.enter_async_context(
            _Session(
                read,
                write,
                message_handler=_message_handler(params.config.name, refresh),
                client_info=CLIENT_INFO,
            )
        )
        era, tools = await _start(session, params, ends)
        ends.connected = True
        link = _Link(session, ends, refresh)
        events.connected(link, session.protocol_version or "unknown", era, tools)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_refresh_on_change, session, params, events, changes_out, refresh)
            if era == "modern" and _announces_list_changes(session):
                tasks.start_soon(_listen_for_changes, session, params.config.name, refresh)
            await ends.closed.wait()
            tasks.cancel_scope.cancel()


def _leaf(exc: BaseException) -> BaseException:
    """The error inside (possibly nested) exception groups: the first that is not a
    cancellation."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (inner or list(exc.exceptions))[0]
    return exc


async def _open_transport(
    stack: AsyncExitStack, params: ConnectParams, ends: _Ends
) -> TransportStreams:
    config = params.config
    if config.command is not None:
        assert params.log is not None
        try:
            channel = await stack.enter_async_context(
                stdio_channel(
                    config.name,
                    config.command,
                    config.args,
                    env=params.env,
                    cwd=params.cwd,
                    log=params.log,
                )
            )
        except OSError as exc:
            raise McpStartError(f"cannot start {config.command!r}: {_os_error(exc)}") from None

        async def watch() -> None:
            await channel.closed.wait()
            ends.why = await channel.ending()
            ends.closed.set()

        tasks = await stack.enter_async_context(anyio.create_task_group())
        tasks.start_soon(watch)
        ends.watched = True
        stack.callback(tasks.cancel_scope.cancel)
        return channel.read_stream, channel.write_stream
    assert config.url is not None
    client = await stack.enter_async_context(
        httpx2.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx2.Timeout(30.0, read=max(300.0, config.timeout_s + 30.0)),
        )
    )
    return await stack.enter_async_context(
        _watched(streamable_http_client(config.url, http_client=client), ends)
    )


@asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[TransportStreams], ends: _Ends
) -> AsyncIterator[TransportStreams]:
    """An HTTP transport; once it has ended, ``ends.closed`` is set."""
    async with transport as (read, write):
        try:
            yield read, write
        finally:
            ends.closed.set()


def _os_error(exc: OSError) -> str:
    text = exc.strerror or str(exc)
    return f"{text}: {exc.filename}" if exc.filename else text


async def _start(
    session: ClientSession, params: ConnectParams, ends: _Ends
) -> tuple[Era, list[WireTool]]:
    """The handshake (or discovery) and the first full listing, before the deadline."""
    step = "connecting"
    try:
        with anyio.fail_after(max(params.deadline - time.monotonic(), 0.0)):
            era = await _negotiate(session, params)
            step = "listing its tools"
            return era, await _list_tools(session)
    except TimeoutError:
        raise McpStartError(
            f"the server was not ready within {params.config.startup_timeout_s:g} s (still {step})"
        ) from None
    except (
        MCPError,
        ValidationError,
        RuntimeError,
        anyio.BrokenResourceError,
        anyio.ClosedResourceError,
    ) as exc:
        if ends.closed.is_set() or _is_closed(exc):
            with anyio.move_on_after(2.0):
                await ends.closed.wait()
            raise McpStartError(f"{ends.why} before it was ready") from None
        raise McpStartError(f"{step} failed: {_describe(exc)}") from None


async def _negotiate(session: ClientSession, params: ConnectParams) -> Era:
    if params.era == "modern":
        await session.discover()
        return "modern"
    try:
        await session.initialize()
        return "handshake"
    except MCPError as exc:
        if params.forced or exc.code not in REFUSED_HANDSHAKE:
            raise
        refusal: Exception = exc
    except RuntimeError as exc:  # answered with a version outside the handshake era
        if params.forced:
            raise
        refusal = exc
    logger.debug(
        "MCP server %s refused initialize (%s); trying server/discover", params.config.name, refusal
    )
    await session.discover()
    return "modern"


async def _list_tools(session: ClientSession) -> list[WireTool]:
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


class _Refresh:
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


REFRESH_WAIT_S = 10.0


def _message_handler(name: str, refresh: _Refresh) -> MessageHandlerFnT:
    async def handle(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            refresh.request()
        elif isinstance(message, Exception):
            logger.warning("MCP server %s: transport error: %s", name, _describe(message))

    return handle


def _announces_list_changes(session: ClientSession) -> bool:
    capabilities = session.server_capabilities
    return bool(capabilities and capabilities.tools and capabilities.tools.list_changed)


async def _listen_for_changes(session: ClientSession, name: str, refresh: _Refresh) -> None:
    """2026-07-28: tool-list changes come on a ``subscriptions/listen`` stream."""
    try:
        async with listen(session, tools_list_changed=True) as subscription:
            async for _event in subscription:
                refresh.request()
    except (MCPError, SubscriptionLost, ListenNotSupportedError, TimeoutError) as exc:
        logger.info(
            "MCP server %s: no tool-list changes: subscriptions/listen ended (%s)", name, exc
        )


async def _refresh_on_change(
    session: ClientSession,
    params: ConnectParams,
    events: ConnectionEvents,
    changes: MemoryObjectReceiveStream[None],
    refresh: _Refresh,
) -> None:
    name = params.config.name
    async for _ in changes:
        refresh.begin()
        try:
            with anyio.fail_after(params.config.timeout_s):
                tools = await _list_tools(session)
        except (MCPError, ValidationError, TimeoutError, RuntimeError) as exc:
            logger.warning(
                "MCP server %s: listing tools after a change failed: %s", name, _describe(exc)
            )
        else:
            events.tools_listed(tools)
        finally:
            refresh.end()


class _Link:
    """Calls over a live session (see ``_link.Link``)."""

    def __init__(self, session: ClientSession, ends: _Ends, refresh: _Refresh) -> None:
        self._session = session
        self._ends = ends
        self._refresh = refresh

    async def call(self, tool: str, arguments: dict[str, Any]) -> RawResult:
        if self._ends.closed.is_set():
            raise ConnectionLost(self._ends.why)

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            # Asked for so a server may report it; it never extends the call's timeout.
            logger.debug("MCP tool %s: progress %s of %s %s", tool, progress, total, message or "")

        try:
            result = await self._session.call_tool(tool, arguments, progress_callback=progress)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._ends.lost()
            raise ConnectionLost(self._ends.why) from None
        except MCPError as exc:
            if self._ends.closed.is_set() or _is_closed(exc):
                self._ends.lost()
                raise ConnectionLost(self._ends.why) from None
            raise McpToolError(f"the server refused the call: {_describe(exc)}") from None
        except ValidationError:
            raise McpToolError("the server's answer is not a valid tools/call result") from None
        except RuntimeError as exc:  # an input_required or extension answer we cannot use
            raise McpToolError(f"the server's answer could not be used: {exc}") from None
        await self._refresh.settled()  # a change the call announced is listed first
        return RawResult(
            result.structured_content,
            [
                block.model_dump(by_alias=True, exclude_none=True, mode="json")
                for block in result.content
            ],
            bool(result.is_error),
        )


def _is_closed(exc: BaseException) -> bool:
    if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError):
        return True
    return (
        isinstance(exc, MCPError)
        and exc.code == types.CONNECTION_CLOSED
        and exc.message == "Connection closed"
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return f"{exc.message} (code {exc.code})"
    if isinstance(exc, ValidationError):
        return "the server's answer does not fit the protocol"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
