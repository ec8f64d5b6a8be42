"""The one JSON-RPC entry point of the daemon: the bytes of one frame in, replies out.

:meth:`Dispatcher.receive` does everything JSON-RPC, under one guard:

* parse (``_jsonrpc``): strict UTF-8, no ``NaN``/``Infinity`` literals, no lone
  surrogates, nesting at most ``MAX_DEPTH`` levels;
* check the envelope: ``jsonrpc``, the JSON type of ``id``, ``method``, ``params``,
  ``result`` and ``error``;
* route replies to the daemon's own requests (``tools/call``, ``permission/request``,
  ``llm/generate``), which live in their own table with ids no client can guess;
* gate on the lifecycle: nothing but ``initialize`` before it, one ``initialize``,
  nothing after ``shutdown``, ``exit`` handled here;
* dispatch requests to the handlers the server gives, one task each, and answer each
  request exactly once, ``$/cancelRequest`` included (it cancels only the client's own
  pending requests).

Nothing a client sends can raise out of ``receive``: an internal fault is logged with its
traceback on stderr and answered -32603 with a plain message. No traceback or library
text goes on the wire. The dispatcher knows no method's meaning: the server passes the
handlers (:class:`Handlers`); the transport passes a :class:`FrameSink`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from ..protocol import RawJson, RpcError, dumps, encode_frame
from ..tool import JsonRpcCode
from ._errors import NotInitializedError
from ._jsonrpc import MAX_DEPTH, has_lone_surrogate, parse, table_key, valid_id
from ._outbound import CANCEL_REQUEST, FrameSink, Outbound

__all__ = [
    "CANCEL_REQUEST",
    "MAX_DEPTH",
    "Dispatcher",
    "FrameSink",
    "Handlers",
    "NotificationHandler",
    "RequestHandler",
    "RpcError",
]

logger = logging.getLogger(__name__)

SERVER_NOT_INITIALIZED = -32002
"""LSP's answer to a request before ``initialize`` (LSP's own code, not JSON-RPC's)."""

INITIALIZE, INITIALIZED, SHUTDOWN, EXIT = "initialize", "initialized", "shutdown", "exit"


RequestHandler = Callable[[Any], Coroutine[Any, Any, Any]]
"""Takes the raw params (JSON) and returns the result as JSON (or raises)."""
NotificationHandler = Callable[[Any], None]


class Handlers(Protocol):
    """What the server gives the dispatcher: the methods and the lifecycle hooks."""

    requests: dict[str, RequestHandler]
    notifications: dict[str, NotificationHandler]

    def all_optional(self, method: str) -> bool:
        """Whether every param of ``method`` is optional (``params: []`` then reads as {})."""
        ...

    def initialize(self, params: dict[str, Any], peer: Dispatcher) -> Any:
        """Answer ``initialize``; ``RpcError(-32600)`` refuses the connection (token)."""
        ...

    async def shutdown(self) -> None: ...


# -- the dispatcher ----------------------------------------------------------------------


class Dispatcher(Outbound):
    """JSON-RPC for one connection, and the daemon's ``Peer`` on it (see ``Outbound``)."""

    def __init__(
        self,
        handlers: Handlers,
        sink: FrameSink,
        *,
        token_required: bool = False,
        frame: Callable[[str], bytes] = encode_frame,
        max_frame: int | None = None,
        not_initialized: int | None = None,
    ) -> None:
        super().__init__(sink, frame, max_frame)
        self._handlers = handlers
        self._not_initialized = not_initialized
        """The code of a request before ``initialize``; ``None``: LSP's -32002, and our own
        methods' -32026 (ACP, where -32002 means "not found", answers -32600)."""
        self.token_required = token_required
        self.state = "new"  # -> "ready" -> "shutdown"
        self.rejected = False
        self.exit_code: int | None = None
        self.ended: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        """Resolves with the exit code on ``exit``, or -1 when the connection is refused."""
        self._incoming: dict[tuple[bool, str | int], asyncio.Task[None]] = {}

    # -- inbound -------------------------------------------------------------------------

    def receive(self, body: bytes) -> None:
        """The one inbound entry point. Never raises."""
        try:
            self._receive(body)
        except Exception:
            logger.exception("internal fault on an inbound message")

    def _receive(self, body: bytes) -> None:
        try:
            data, bad_unicode = parse(body)
        except RpcError as exc:
            self._reply_error(None, exc.code, exc.message)
            return
        if bad_unicode:
            self._bad_unicode(data)
            return
        if not isinstance(data, dict):
            kind = "batch requests are not supported" if isinstance(data, list) else "not an object"
            self._reply_error(None, JsonRpcCode.INVALID_REQUEST, f"invalid request: {kind}")
            return
        has_id = "id" in data
        msg_id = data.get("id")
        answer_id = msg_id if has_id and valid_id(msg_id) else None
        if data.get("jsonrpc") != "2.0":
            if has_id:
                self._invalid(answer_id, "jsonrpc must be '2.0'")
            return
        if "method" not in data:
            if has_id and ("result" in data or "error" in data):
                self.route_reply(msg_id, data)
            elif has_id:
                self._invalid(answer_id, "no method, result or error")
            return
        method = data["method"]
        if not isinstance(method, str):
            if has_id:
                self._invalid(answer_id, "method must be a string")
            return
        if not has_id:
            self._notification(method, data.get("params"))
            return
        if not valid_id(msg_id):
            self._invalid(None, "id must be a string or an integer")
            return
        self._request(msg_id, method, data)

    def _bad_unicode(self, data: Any) -> None:
        """A message holding a lone surrogate: answered with its own id when the id is
        clean (a reply to us fails its request), with ``id: null`` otherwise."""
        text = "invalid Unicode (a lone surrogate escape)"
        msg_id = data.get("id") if isinstance(data, dict) else None
        clean_id = valid_id(msg_id) and not has_lone_surrogate(msg_id)
        if not isinstance(data, dict) or not clean_id:
            code = (
                JsonRpcCode.PARSE_ERROR
                if not isinstance(data, dict)
                else JsonRpcCode.INVALID_REQUEST
            )
            if not isinstance(data, dict) or "id" in data:
                self._reply_error(None, code, f"invalid request: {text}")
            return
        if "method" not in data:
            self.fail_reply(msg_id, RpcError(JsonRpcCode.INVALID_PARAMS, f"reply: {text}"))
            return
        self._reply_error(msg_id, JsonRpcCode.INVALID_PARAMS, f"params: {text}")

    def _request(self, msg_id: str | int, method: str, data: dict[str, Any]) -> None:
        key = table_key(msg_id)
        if key in self._incoming:
            self._invalid(msg_id, f"id {msg_id!r} is already in use by a pending request")
            return
        if self.rejected:
            self._reply_error(
                msg_id, JsonRpcCode.INVALID_REQUEST, "connection refused: no valid token"
            )
            return
        if self.state == "shutdown":
            self._reply_error(
                msg_id, JsonRpcCode.INVALID_REQUEST, f"{method}: the server is shutting down"
            )
            return
        if method in self._handlers.notifications or method in (INITIALIZED, EXIT, CANCEL_REQUEST):
            self._invalid(msg_id, f"{method} is a notification; send it without an id")
            return
        if method == INITIALIZE:
            if self.state != "new":
                self._reply_error(
                    msg_id, JsonRpcCode.INVALID_REQUEST, "initialize: already initialized"
                )
                return
            self._initialize(msg_id, data.get("params"))
            return
        if self.state != "ready":
            if self.token_required:
                self._refuse(msg_id)
                return
            code, text = (
                SERVER_NOT_INITIALIZED,
                f"{method}: the server is not initialized (send initialize first)",
            )
            if self._not_initialized is not None:
                code = self._not_initialized
            elif method in self._handlers.requests:
                code = NotInitializedError.code  # our own methods keep their code
            self._reply_error(msg_id, code, text)
            return
        if method == SHUTDOWN:
            self.state = "shutdown"  # now: an exit right behind it must see it
            self._spawn(key, msg_id, self._shutdown(key))
            return
        handler = self._handlers.requests.get(method)
        if handler is None:
            self._reply_error(msg_id, JsonRpcCode.METHOD_NOT_FOUND, f"method not found: {method}")
            return
        if "params" not in data:
            self._reply_error(
                msg_id, JsonRpcCode.INVALID_PARAMS, "params: missing (send {} for none)"
            )
            return
        params = data["params"]
        if params == [] and self._handlers.all_optional(method):
            params = {}  # Lua clients encode an empty table as []
        if not isinstance(params, dict):
            self._reply_error(msg_id, JsonRpcCode.INVALID_PARAMS, "params: expected an object")
            return
        self._spawn(key, msg_id, handler(params))

    def _spawn(
        self, key: tuple[bool, str | int], msg_id: str | int, work: Coroutine[Any, Any, Any]
    ) -> None:
        task = asyncio.ensure_future(self._answer(msg_id, work))
        self._incoming[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            self._incoming.pop(key, None)
            if finished.cancelled():  # cancelled before its handler began: still answer
                work.close()
                self._reply_error(msg_id, JsonRpcCode.REQUEST_CANCELLED, "request cancelled")

        task.add_done_callback(done)

    async def _answer(self, msg_id: str | int, work: Coroutine[Any, Any, Any]) -> None:
        """Await one request's handler and write its one reply."""
        try:
            result = await work
        except asyncio.CancelledError:
            self._reply_error(msg_id, JsonRpcCode.REQUEST_CANCELLED, "request cancelled")
            return
        except RpcError as exc:
            self._reply_error(msg_id, exc.code, exc.message)
            return
        except Exception:
            logger.exception("internal fault answering request %r", msg_id)
            self._reply_error(msg_id, JsonRpcCode.INTERNAL_ERROR, "internal error")
            return
        try:
            if isinstance(result, RawJson):  # encoded already: spliced in, not re-encoded
                text = f'{{"jsonrpc":"2.0","id":{dumps(msg_id)},"result":{result.text}}}'
            else:
                text = dumps({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except (TypeError, ValueError):
            logger.exception("cannot encode the result of request %r", msg_id)
            self._reply_error(
                msg_id, JsonRpcCode.INTERNAL_ERROR, "internal error: the result is not JSON"
            )
            return
        self._write_text(text, reply_to=msg_id)

    def _initialize(self, msg_id: str | int, params: Any) -> None:
        """Answered inline, so that requests pipelined right behind it find it done."""
        if params == []:
            params = {}
        if not isinstance(params, dict):
            self._reply_error(msg_id, JsonRpcCode.INVALID_PARAMS, "params: expected an object")
            return
        try:
            result = self._handlers.initialize(params, self)
        except RpcError as exc:
            if self.token_required and exc.code == JsonRpcCode.INVALID_REQUEST:
                self._refused()
            self._reply_error(msg_id, exc.code, exc.message)
            return
        self.state = "ready"
        self._write_text(dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}), msg_id)

    def _refuse(self, msg_id: str | int) -> None:
        text = "connection refused: initialize with a valid initializationOptions.token first"
        self._reply_error(msg_id, JsonRpcCode.INVALID_REQUEST, text)
        self._refused()

    def _refused(self) -> None:
        self.rejected = True
        if not self.ended.done():
            self.ended.set_result(-1)

    async def _shutdown(self, own: tuple[bool, str | int]) -> None:
        await self._handlers.shutdown()
        await self.settle(timeout=2.0, exclude=own)
        return None

    def _notification(self, method: str, params: Any) -> None:
        if method == EXIT:
            code = 0 if self.state == "shutdown" else 1
            self.exit_code = code
            if not self.ended.done():
                self.ended.set_result(code)
            return
        if self.state not in ("ready", "shutdown"):
            logger.debug("dropped %s before initialize", method)
            return
        if method == CANCEL_REQUEST:
            self._cancel_incoming(params)
            return
        handler = self._handlers.notifications.get(method)
        if handler is None:
            logger.debug("ignored notification %s", method)
            return
        if params == []:
            params = {}
        handler(params)

    def _cancel_incoming(self, params: Any) -> None:
        msg_id = params.get("id") if isinstance(params, dict) else None
        if not valid_id(msg_id):
            logger.debug("ignored $/cancelRequest without a valid id")
            return
        task = self._incoming.get(table_key(msg_id))
        if task is not None:
            task.cancel()

    # -- ending --------------------------------------------------------------------------

    async def settle(self, timeout: float, exclude: tuple[bool, str | int] | None = None) -> None:
        """Wait (bounded) for the client's pending requests to be answered."""
        tasks = [t for k, t in self._incoming.items() if k != exclude]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def close(self, timeout: float = 5.0) -> None:
        """The connection ends: answer every pending request (cancelling the slow ones)
        and fail the daemon's own requests."""
        await self.settle(timeout)
        for task in list(self._incoming.values()):
            task.cancel()
        await self.settle(1.0)
        self.fail_outgoing("the client disconnected")
