"""One connection to an MCP server through the official SDK: the session, its protocol
version, and calls.

Owns the protocol-version policy. The SDK's ``mode="auto"`` probes ``server/discover``
first and waits 10 s on a server that ignores it; instead the handshake era is tried
first (``initialize``, which nearly every deployed server speaks, so it costs one round
trip) and only a server that refuses ``initialize`` is asked ``server/discover``
(2026-07-28). The era that worked is remembered by the caller and tried first next time;
``config.protocol`` forces one and forbids the fallback.

It also owns the SDK's sharp edges: the session's own output-schema check is turned off
(a ``structuredContent`` that misses its schema is still a good answer; ``McpServer``
logs it). The transports and what their failures mean are ``_transport``'s; listing
tools and following list changes are ``_listing``'s.

It does not know statuses, restarts or timeouts of calls: ``McpServer`` does. Importing
this module imports the SDK; ``McpServer`` loads it lazily through ``_sdk``.
"""

from __future__ import annotations

import logging
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from cleveragents import __version__

from ._errors import ConnectionLost, McpServerFault, McpStartError, McpToolError
from ._link import ConnectionEvents, ConnectParams, Era, RawResult, WireTool
from ._listing import (
    Refresh,
    announces_list_changes,
    list_tools,
    listen_for_changes,
    message_handler,
    refresh_on_change,
)
from ._transport import (
    EXPECTED_FAILURES,
    AnswerTooLarge,
    Ends,
    describe,
    is_closed,
    leaf,
    open_transport,
)

logger = logging.getLogger("cleveragents.mcp")

CLIENT_INFO = types.Implementation(name="cleveragents", version=__version__)
REFUSED_HANDSHAKE = frozenset(
    {types.METHOD_NOT_FOUND, types.UNSUPPORTED_PROTOCOL_VERSION, types.INVALID_REQUEST}
)
"""Answers to ``initialize`` that mean "not this era": try 2026-07-28 instead."""


class _Session(ClientSession):
    """A ``ClientSession`` that never fails a call over its ``outputSchema``."""

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        # The SDK raises RuntimeError on a mismatch (and may list tools to find the
        # schema); a mismatching answer is still the server's answer.
        return None


async def run(params: ConnectParams, events: ConnectionEvents) -> str:
    """Connect, report ``connected``, serve until the connection ends; return why it ended.

    Raises ``McpStartError`` (with the reason in words) when the server cannot be made
    ready before ``params.deadline``."""
    ends = Ends()
    try:
        await _serve(params, events, ends)
    except Exception as exc:  # the transport's task groups wrap what failed in them
        failure = leaf(exc)
        if isinstance(failure, McpStartError):
            raise failure from None
        if isinstance(failure, McpServerFault | AnswerTooLarge):  # our bound, not a fault
            return str(failure)
        if not isinstance(failure, EXPECTED_FAILURES):
            logger.warning("MCP server %s: connection failed", params.config.name, exc_info=exc)
        if not ends.connected:
            raise McpStartError(f"cannot connect: {describe(failure)}") from None
        return f"the connection failed: {describe(failure)}"
    return ends.why


async def _serve(params: ConnectParams, events: ConnectionEvents, ends: Ends) -> None:
    async with AsyncExitStack() as stack:
        read, write = await open_transport(stack, params, ends)
        changes_in, changes_out = anyio.create_memory_object_stream[None](1)
        stack.callback(changes_in.close)
        stack.callback(changes_out.close)
        refresh = Refresh(changes_in)
        session = await stack.enter_async_context(
            _Session(
                read,
                write,
                message_handler=message_handler(params.config.name, refresh),
                client_info=CLIENT_INFO,
            )
        )
        era, tools = await _start(session, params, ends)
        ends.connected = True
        link = _Link(session, ends, refresh)
        await events.connected(link, session.protocol_version or "unknown", era, tools)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(
                refresh_on_change, session, params, events, changes_out, refresh, tools
            )
            if era == "modern" and announces_list_changes(session):
                tasks.start_soon(listen_for_changes, session, params.config.name, refresh)
            await ends.closed.wait()
            tasks.cancel_scope.cancel()


async def _start(
    session: ClientSession, params: ConnectParams, ends: Ends
) -> tuple[Era, list[WireTool]]:
    """The handshake (or discovery) and the first full listing, before the deadline."""
    step = "connecting"
    try:
        with anyio.fail_after(max(params.deadline - time.monotonic(), 0.0)):
            era = await _negotiate(session, params)
            step = "listing its tools"
            return era, await list_tools(session)
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
        if ends.closed.is_set() or is_closed(exc):
            with anyio.move_on_after(2.0):
                await ends.closed.wait()
            raise McpStartError(f"{ends.why} before it was ready") from None
        raise McpStartError(f"{step} failed: {describe(exc)}") from None


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


class _Link:
    """Calls over a live session (see ``_link.Link``)."""

    def __init__(self, session: ClientSession, ends: Ends, refresh: Refresh) -> None:
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
            if self._ends.closed.is_set() or is_closed(exc):
                self._ends.lost()
                raise ConnectionLost(self._ends.why) from None
            raise McpToolError(f"the server refused the call: {describe(exc)}") from None
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
