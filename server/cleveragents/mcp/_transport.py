"""The two transports of an MCP connection, how a connection ends, and what its
failures mean.

Owns opening a server's transport (our own stdio channel, or the SDK's streamable HTTP
client over an ``httpx2`` client carrying the entry's headers and timeouts), the
:class:`Ends` that says when and why the transport is over, and the reading of the
SDK's, anyio's and the network's errors: which are the server's or the network's
(:data:`EXPECTED_FAILURES`), which mean "closed" (:func:`is_closed`), and the words
for each (:func:`describe`).

It knows nothing of sessions, eras or tools. Imports the SDK: only ever loaded through
``_connection``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager

import anyio
import httpx2
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ._errors import McpStartError
from ._link import ConnectParams
from ._stdio import stdio_channel

EXPECTED_FAILURES = (httpx2.HTTPError, OSError, MCPError, anyio.BrokenResourceError)
"""Failures of a transport that are the server's or the network's, not ours: reported
in ``error`` without a traceback in the log. (``httpx2`` is the HTTP stack the SDK's
streamable HTTP client takes; its errors reach us unwrapped.)"""


class Ends:
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


async def open_transport(
    stack: AsyncExitStack, params: ConnectParams, ends: Ends
) -> TransportStreams:
    """The session's two streams, their transport entered on ``stack``; ``ends`` is
    told when the transport is over."""
    config = params.config
    if config.command is not None:
        return await _open_stdio(stack, params, ends)
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


async def _open_stdio(stack: AsyncExitStack, params: ConnectParams, ends: Ends) -> TransportStreams:
    config = params.config
    assert config.command is not None
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


@asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[TransportStreams], ends: Ends
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


def leaf(exc: BaseException) -> BaseException:
    """The error inside (possibly nested) exception groups: the first that is not a
    cancellation."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def is_closed(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is closed (not that the server refused)."""
    if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError):
        return True
    return (
        isinstance(exc, MCPError)
        and exc.code == types.CONNECTION_CLOSED
        and exc.message == "Connection closed"
    )


def describe(exc: BaseException) -> str:
    """``exc`` in words for a status or a record (no third-party validation text)."""
    if isinstance(exc, MCPError):
        return f"{exc.message} (code {exc.code})"
    if isinstance(exc, ValidationError):
        return "the server's answer does not fit the protocol"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
