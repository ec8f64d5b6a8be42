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

import asyncio
import contextvars
import json
import logging
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client._input_required import run_input_required_driver
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from cleveragents import __version__
from cleveragents.tool import ToolCallContext

from ._errors import ConnectionLost, McpServerFault, McpStartError, McpToolError
from ._hooks import (
    ElicitationAnswer,
    ElicitationRefused,
    SamplingRefused,
    answer_checker,
    read_elicitation,
    read_sampling,
)
from ._link import ConnectionEvents, ConnectParams, Era, Progress, RawResult, WireTool
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
            raise McpStartError(f"cannot connect: {describe(failure, ends)}") from None
        return f"the connection failed: {describe(failure, ends)}"
    return ends.why


async def _serve(params: ConnectParams, events: ConnectionEvents, ends: Ends) -> None:
    async with AsyncExitStack() as stack:
        read, write = await open_transport(stack, params, ends)
        changes_in, changes_out = anyio.create_memory_object_stream[None](1)
        stack.callback(changes_in.close)
        stack.callback(changes_out.close)
        refresh = Refresh(changes_in)
        asks = _Asks(params)
        session = await stack.enter_async_context(
            _Session(
                read,
                write,
                message_handler=message_handler(params.config.name, refresh),
                client_info=CLIENT_INFO,
                elicitation_callback=asks.elicit,
                sampling_callback=asks.sample,
                list_roots_callback=asks.list_roots,
                logging_callback=asks.log,
            )
        )
        era, tools = await _start(session, params, ends)
        ends.start_scope = None
        ends.connected = True
        link = _Link(session, ends, refresh, asks)
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
        with anyio.fail_after(max(params.deadline - time.monotonic(), 0.0)) as scope:
            ends.start_scope = scope
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
        raise McpStartError(f"{step} failed: {describe(exc, ends)}") from None


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


_ASKING: contextvars.ContextVar[ToolCallContext | None] = contextvars.ContextVar(
    "cleveragents_mcp_asking", default=None
)
"""The call whose task is asking: set by a call, read by a server request answered in
that task (2026-07-28's input-required rounds run in the caller's task)."""

MAX_LOG_CHARS = 2000
"""A server's log message is cut to this many characters in its log file."""
MAX_LOG_BYTES = 4 * 1024 * 1024
"""Log messages written per connection; the rest are dropped (HTTP servers have no log
file: theirs are dropped at once)."""


class _Asks:
    """The session's callbacks: what the server asks of us, answered by the hooks for the
    call it is about (see ``_hooks``)."""

    def __init__(self, params: ConnectParams) -> None:
        self._params = params
        self._name = params.config.name
        self._hooks = params.hooks
        self.calls: list[ToolCallContext] = []
        """The calls in flight on this connection, oldest first."""
        self._logged = 0

    def current(self) -> ToolCallContext | None:
        """The call a server request is about: the asking task's own, else the latest in
        flight (on stdio a server's request names no call; it asks while serving one)."""
        asking = _ASKING.get()
        if asking is not None:
            return asking
        return self.calls[-1] if self.calls else None

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        raw = params.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            request = read_elicitation(self._name, raw)
            check = await asyncio.to_thread(answer_checker, request)
        except (ValueError, ElicitationRefused) as exc:
            return types.ErrorData(code=types.INVALID_PARAMS, message=f"elicitation refused: {exc}")
        try:
            answer = await self._hooks.elicit(self.current(), request)
        except Exception:  # the hook's failure is ours, not the server's business
            logger.exception("MCP server %s: answering an elicitation failed", self._name)
            answer = ElicitationAnswer("cancel")
        try:
            await asyncio.to_thread(check, answer)
        except ElicitationRefused as exc:
            logger.warning("MCP server %s: elicitation answer refused: %s", self._name, exc)
            return types.ErrorData(code=types.INVALID_PARAMS, message=f"elicitation failed: {exc}")
        return types.ElicitResult(action=answer.action, content=answer.content)

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        """A server's ``sampling/createMessage``: the hooks' model answers, or the server
        is told why not (tools in the request, a profile that refused, no model)."""
        raw = params.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            request = read_sampling(self._name, raw)
            answer = await self._hooks.sample(self.current(), request)
        except SamplingRefused as exc:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"sampling refused: {exc}")
        except Exception:  # the model's failure is ours; the server gets a short error
            logger.exception("MCP server %s: answering a sampling request failed", self._name)
            return types.ErrorData(code=types.INTERNAL_ERROR, message="sampling failed")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=answer.text),
            model=answer.model,
            stop_reason=answer.stop_reason,
        )

    async def list_roots(
        self, context: ClientRequestContext
    ) -> types.ListRootsResult | types.ErrorData:
        roots = [
            types.Root(uri=Path(path).as_uri(), name=Path(path).name or path)  # type: ignore[arg-type]
            for path in self._hooks.roots()
        ]
        return types.ListRootsResult(roots=roots)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A server's ``notifications/message``: a line in its log file (never the
        daemon's own log), each cut to ``MAX_LOG_CHARS``, at most ``MAX_LOG_BYTES`` per
        connection (a line says when the rest is dropped)."""
        log = self._params.log
        if log is None or self._logged > MAX_LOG_BYTES:
            return
        data = params.data
        text = data if isinstance(data, str) else _json_text(data)
        where = f" {params.logger}"[:80] if params.logger else ""
        line = f"[{params.level}{where}] {text[:MAX_LOG_CHARS]}"
        self._logged += len(line) + 1
        if self._logged > MAX_LOG_BYTES:
            line = f"[cleveragents] over {MAX_LOG_BYTES} bytes of log messages: the rest is dropped"
        log.note(line)  # one short append: cheaper than a thread


def _json_text(data: object) -> str:
    try:
        return json.dumps(data, ensure_ascii=False, default=str)[: MAX_LOG_CHARS + 1]
    except (TypeError, ValueError, RecursionError):
        return repr(type(data))


class _Link:
    """Calls over a live session (see ``_link.Link``)."""

    def __init__(self, session: ClientSession, ends: Ends, refresh: Refresh, asks: _Asks) -> None:
        self._session = session
        self._ends = ends
        self._refresh = refresh
        self._asks = asks

    async def roots_changed(self) -> None:
        """Tell the server its roots changed (``notifications/roots/list_changed``)."""
        if self._ends.closed.is_set():
            return
        try:
            await self._session.send_notification(types.RootsListChangedNotification())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError) as exc:
            logger.debug("MCP server %s: roots change not sent: %s", self._asks._name, exc)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        call: ToolCallContext | None = None,
        progress: Progress | None = None,
    ) -> RawResult:
        if self._ends.closed.is_set():
            raise ConnectionLost(self._ends.why)

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            # It never extends the call's timeout.
            if progress is not None:
                progress(done, total, message)

        calls = self._asks.calls
        if call is not None:
            calls.append(call)
        token = _ASKING.set(call)
        try:
            result = await self._call(tool, arguments, on_progress)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._ends.lost()
            raise ConnectionLost(self._ends.why) from None
        except MCPError as exc:
            if self._ends.closed.is_set() or is_closed(exc):
                self._ends.lost()
                raise ConnectionLost(self._ends.why) from None
            raise McpToolError(
                f"the server refused the call: {describe(exc, self._ends)}"
            ) from None
        except ValidationError:
            raise McpToolError("the server's answer is not a valid tools/call result") from None
        except RuntimeError as exc:  # an extension answer, or too many input rounds
            raise McpToolError(f"the server's answer could not be used: {exc}") from None
        finally:
            _ASKING.reset(token)
            if call is not None:
                calls.remove(call)
        await self._refresh.settled()  # a change the call announced is listed first
        return RawResult(
            result.structured_content,
            [
                block.model_dump(by_alias=True, exclude_none=True, mode="json")
                for block in result.content
            ],
            bool(result.is_error),
        )

    async def _call(
        self, tool: str, arguments: dict[str, Any], on_progress: Any
    ) -> types.CallToolResult:
        """``tools/call``, with 2026-07-28's input-required rounds answered through the
        same callbacks (in this task, so they know their call)."""
        session = self._session
        first = await session.call_tool(
            tool, arguments, progress_callback=on_progress, allow_input_required=True
        )
        if not isinstance(first, types.InputRequiredResult):
            return first

        async def dispatch(key: str, request: types.InputRequest) -> Any:
            meta = request.params.meta if request.params else None
            context = ClientRequestContext(session=session, request_id=key, meta=meta)
            return await session.dispatch_input_request(context, request)

        async def retry(responses: Any, state: str | None) -> Any:
            return await session.call_tool(
                tool, arguments, progress_callback=on_progress,
                input_responses=responses, request_state=state, allow_input_required=True,
            )  # fmt: skip

        return await run_input_required_driver(first, dispatch=dispatch, retry=retry)
