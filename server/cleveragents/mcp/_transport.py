"""The two transports of an MCP connection, how a connection ends, and what its
failures mean.

Owns opening a server's transport (our own stdio channel, or the SDK's streamable HTTP
client over an ``httpx2`` client carrying the entry's headers and timeouts, and OAuth
(``_oauth``) unless the entry sends its own ``Authorization`` header), the
:class:`Ends` that says when and why the transport is over, and the reading of the
SDK's, anyio's and the network's errors: which are the server's or the network's
(:data:`EXPECTED_FAILURES`), which mean "closed" (:func:`is_closed`), and the words
for each (:func:`describe`). An HTTP answer of 400 or more is noted (its status and the
URL without credentials) so a failure says which request failed and how.

An HTTP answer is capped as a stdio line is: a JSON body (which the SDK reads whole) is
counted as it arrives and, past ``MAX_HTTP_ANSWER_BYTES``, the call fails with
:class:`AnswerTooLarge` and the connection is dropped; one Server-Sent Event has the same
cap (the SDK's own check fails that call). Answers are asked for uncompressed, and a
compressed JSON answer is refused the same way.

It knows nothing of sessions, eras or tools. Imports the SDK: only ever loaded through
``_connection``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ._errors import McpStartError
from ._link import ConnectParams
from ._oauth import Authorizer
from ._stdio import stdio_channel

MAX_HTTP_ANSWER_BYTES = 16 * 1024 * 1024
"""The most one HTTP answer (a JSON body, or one Server-Sent Event) may hold. It is read
into memory whole and then built into objects several times its size; 16 MiB is also the
largest output a record may quote (``maxToolOutputBytes``)."""

EXPECTED_FAILURES = (
    httpx2.HTTPError, OSError, MCPError, anyio.BrokenResourceError, OAuthFlowError,
)  # fmt: skip
"""Failures of a transport that are the server's or the network's, not ours: reported
in ``error`` without a traceback in the log. (``httpx2`` is the HTTP stack the SDK's
streamable HTTP client takes; its errors reach us unwrapped.)"""


class Ends:
    """How the current connection can end: ``closed`` is set when the transport is over."""

    def __init__(self) -> None:
        self.closed = anyio.Event()
        self.why = "the connection to the server was closed"
        self.connected = False
        self.http_failure: str | None = None
        """The last answer of 400 or more, in words (cleared by a success)."""
        self.authorizer: Authorizer | None = None
        self.start_scope: anyio.CancelScope | None = None
        """The start-up deadline's scope, stopped while a person signs in."""
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

    cap = AnswerCap(MAX_HTTP_ANSWER_BYTES, ends)
    auth: httpx2.Auth | None = None
    if params.auth is not None and not _own_credentials(config.url, config.headers):
        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)
        ends.authorizer = Authorizer(
            config, params.auth.store, params.auth.events, lambda: pause(ends)
        )
        auth = await ends.authorizer.open(stack, tasks)

    async def note(response: httpx2.Response) -> None:
        ends.http_failure = http_failure(config.name, response)
        await cap.check(response)

    client = await stack.enter_async_context(
        httpx2.AsyncClient(
            # Uncompressed answers only: the cap counts the bytes that arrive, and a
            # compressed body could be a thousand times larger once decoded.
            headers={**config.headers, "Accept-Encoding": "identity"},
            timeout=httpx2.Timeout(30.0, read=max(300.0, config.timeout_s + 30.0)),
            event_hooks={"response": [note]},
            auth=auth,
        )
    )
    transport = streamable_http_client(
        config.url, http_client=client, max_sse_event_size=MAX_HTTP_ANSWER_BYTES
    )
    return await stack.enter_async_context(_watched(transport, ends))


def _own_credentials(url: str, headers: Mapping[str, str]) -> bool:
    """Whether the entry authorizes itself (an ``Authorization`` header, or credentials
    in the URL): then no OAuth, and a 401 is reported as it is."""
    return "@" in urlsplit(url).netloc or any(k.lower() == "authorization" for k in headers)


def pause(ends: Ends) -> Callable[[], None]:
    """Stop the start-up clock while a person signs in; the returned function restarts
    it with the time that was left."""
    scope = ends.start_scope
    if scope is None or scope.deadline == math.inf:
        return lambda: None
    left = max(scope.deadline - anyio.current_time(), 0.0)
    scope.deadline = math.inf

    def resume() -> None:
        scope.deadline = anyio.current_time() + left

    return resume


def http_failure(name: str, response: httpx2.Response) -> str | None:
    """An answer of 400 or more in words: the status, the URL without credentials or
    query, and for a 401 how to authorize."""
    status = response.status_code
    if status < 400:
        return None
    url = scrub_url(str(response.request.url))
    text = f"HTTP {status} from {url}"
    if status == 401:
        text += (
            f"; the server needs authorization: sign in with mcp/login {{name: {name!r}}} "
            f"or `cleveragents mcp login {name}`"
        )
    elif status == 403:
        text += "; the server refused the credentials given (insufficient scope or forbidden)"
    return text


def scrub_url(url: str) -> str:
    """``url`` without ``user:password@``, query or fragment (either may hold a token)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class AnswerTooLarge(httpx2.TransportError):
    """An HTTP answer went past ``MAX_HTTP_ANSWER_BYTES``: the call fails and the
    connection is dropped (its words become the server's ``error``)."""


class AnswerCap:
    """A response hook that cuts each ``application/json`` answer off at ``cap`` bytes:
    the SDK reads such a body whole, so counting it as it arrives is what bounds the
    memory. A hook, not a transport, so the client keeps its own (proxies from the
    environment included). The words of a cut go to ``ends.why`` too: an answer cut
    before the server was ready ends its start with them."""

    def __init__(self, cap: int, ends: Ends) -> None:
        self.cap = cap
        self._ends = ends

    async def check(self, response: httpx2.Response) -> None:
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            return  # Server-Sent Events: the SDK caps each event
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise self.refuse(
                f"the server compressed its answer ({encoding}) although asked not to; "
                "the connection was dropped"
            )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.cap:
            await response.aclose()
            raise self.too_large(f"{int(declared):,} bytes declared")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self)

    def too_large(self, what: str) -> AnswerTooLarge:
        return self.refuse(
            f"the server's answer ({what}) went past {self.cap // (1024 * 1024)} MiB, the "
            "most one HTTP answer may hold; the connection was dropped"
        )

    def refuse(self, why: str) -> AnswerTooLarge:
        self._ends.why = why
        return AnswerTooLarge(why)


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, cap: AnswerCap) -> None:
        self._inner = inner
        self._cap = cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._cap.cap:
                await self._inner.aclose()
                raise self._cap.too_large(f"over {received:,} bytes so far")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


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


def describe(exc: BaseException, ends: Ends | None = None) -> str:
    """``exc`` in words for a status or a record (no third-party validation text); with
    ``ends``, an authorization's failure or the HTTP answer that caused it comes first."""
    if ends is not None:
        if isinstance(exc, OAuthFlowError):
            failure = ends.authorizer.failure if ends.authorizer is not None else None
            return f"authorization failed: {failure or _bounded(exc)}"
        authorizing = ends.authorizer.failure if ends.authorizer is not None else None
        if authorizing is not None and isinstance(exc, httpx2.TransportError):
            return f"authorization failed: {authorizing}"
        if ends.http_failure is not None and isinstance(exc, MCPError | httpx2.HTTPError):
            return ends.http_failure
    if isinstance(exc, OAuthFlowError):
        return f"authorization failed: {_bounded(exc)}"
    if isinstance(exc, MCPError):
        return f"{exc.message} (code {exc.code})"
    if isinstance(exc, ValidationError):
        return "the server's answer does not fit the protocol"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _bounded(exc: BaseException) -> str:
    """An error's words (a server's, maybe), at most 300 printable characters."""
    text = "".join(c if c.isprintable() else " " for c in str(exc)[:300])
    return text or type(exc).__name__
