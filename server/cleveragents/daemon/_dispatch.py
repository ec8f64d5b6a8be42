"""The one JSON-RPC entry point of the daemon: the bytes of one frame in, replies out.

:meth:`Dispatcher.receive` does everything JSON-RPC, under one guard:

* parse: strict UTF-8, no ``NaN``/``Infinity`` literals, no lone surrogates, nesting at
  most :data:`MAX_DEPTH` levels;
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
import itertools
import json
import logging
import re
import secrets
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeGuard

from ..protocol import MAX_BODY, RawJson, dumps, encode_frame
from ._peer import PeerRequestError

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800

MAX_DEPTH = 512
"""Deepest nesting of arrays and objects accepted in one message."""

INITIALIZE, INITIALIZED, SHUTDOWN, EXIT = "initialize", "initialized", "shutdown", "exit"
CANCEL_REQUEST = "$/cancelRequest"
PROGRESS = "$/progress"


class RpcError(Exception):
    """An error reply: a JSON-RPC code and a plain message, never a traceback."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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


class FrameSink(Protocol):
    """Where frames go (the transport)."""

    def write(self, data: bytes) -> None: ...

    async def pace(self) -> None:
        """Wait while the write buffer is over its high-water mark."""
        ...


# -- parsing -----------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decode = json.JSONDecoder(parse_constant=_reject_constant).decode
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests deeper than ``MAX_DEPTH`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _has_lone_surrogate(value: Any) -> bool:
    try:
        dumps(value).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse(body: bytes) -> tuple[Any, bool]:
    """One message's JSON value, and whether it holds a lone surrogate escape (the
    caller answers that with the message's own id when it can); ``RpcError(-32700)``
    naming what is wrong otherwise."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: invalid UTF-8 at byte {exc.start}") from None
    try:
        data = _decode(text)
    except RecursionError:
        raise RpcError(PARSE_ERROR, f"parse error: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from None
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _too_deep(data):
        raise RpcError(PARSE_ERROR, f"parse error: nested deeper than {MAX_DEPTH} levels")
    return data, bool(_SURROGATE_ESCAPE.search(body)) and _has_lone_surrogate(data)


def _valid_id(value: Any) -> TypeGuard[str | int]:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _key(msg_id: str | int) -> tuple[bool, str | int]:
    """Table key of a client request id: 1 and "1" differ, and so do 1, True and 1.0."""
    return isinstance(msg_id, str), msg_id


# -- the dispatcher ----------------------------------------------------------------------


class Dispatcher:
    """JSON-RPC for one connection, and the daemon's ``Peer`` on it."""

    def __init__(
        self,
        handlers: Handlers,
        sink: FrameSink,
        *,
        token_required: bool = False,
        frame: Callable[[str], bytes] = encode_frame,
        max_frame: int | None = None,
    ) -> None:
        self._handlers = handlers
        self._sink = sink
        self._frame = frame
        """JSON text -> the bytes of one message (LSP framing; another face passes its own)."""
        self._max_frame = MAX_BODY if max_frame is None else max_frame
        """The largest frame written (default: the 64 MiB both sides read)."""
        self.token_required = token_required
        self.state = "new"  # -> "ready" -> "shutdown"
        self.rejected = False
        self.exit_code: int | None = None
        self.ended: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        """Resolves with the exit code on ``exit``, or -1 when the connection is refused."""
        self._incoming: dict[tuple[bool, str | int], asyncio.Task[None]] = {}
        self._outgoing: dict[str, asyncio.Future[Any]] = {}
        self._id_prefix = f"ca-{secrets.token_hex(6)}-"
        self._ids = itertools.count(1)

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
            self._reply_error(None, INVALID_REQUEST, f"invalid request: {kind}")
            return
        has_id = "id" in data
        msg_id = data.get("id")
        answer_id = msg_id if has_id and _valid_id(msg_id) else None
        if data.get("jsonrpc") != "2.0":
            if has_id:
                self._invalid(answer_id, "jsonrpc must be '2.0'")
            return
        if "method" not in data:
            if has_id and ("result" in data or "error" in data):
                self._route_reply(msg_id, data)
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
        if not _valid_id(msg_id):
            self._invalid(None, "id must be a string or an integer")
            return
        self._request(msg_id, method, data)

    def _bad_unicode(self, data: Any) -> None:
        """A message holding a lone surrogate: answered with its own id when the id is
        clean (a reply to us fails its request), with ``id: null`` otherwise."""
        text = "invalid Unicode (a lone surrogate escape)"
        msg_id = data.get("id") if isinstance(data, dict) else None
        clean_id = _valid_id(msg_id) and not _has_lone_surrogate(msg_id)
        if not isinstance(data, dict) or not clean_id:
            code = PARSE_ERROR if not isinstance(data, dict) else INVALID_REQUEST
            if not isinstance(data, dict) or "id" in data:
                self._reply_error(None, code, f"invalid request: {text}")
            return
        if "method" not in data:
            future = self._outgoing.pop(msg_id, None) if isinstance(msg_id, str) else None
            if future is not None and not future.done():
                future.set_exception(PeerRequestError(INVALID_PARAMS, f"reply: {text}"))
            return
        self._reply_error(msg_id, INVALID_PARAMS, f"params: {text}")

    def _request(self, msg_id: str | int, method: str, data: dict[str, Any]) -> None:
        key = _key(msg_id)
        if key in self._incoming:
            self._invalid(msg_id, f"id {msg_id!r} is already in use by a pending request")
            return
        if self.rejected:
            self._reply_error(msg_id, INVALID_REQUEST, "connection refused: no valid token")
            return
        if self.state == "shutdown":
            self._reply_error(msg_id, INVALID_REQUEST, f"{method}: the server is shutting down")
            return
        if method in self._handlers.notifications or method in (INITIALIZED, EXIT, CANCEL_REQUEST):
            self._invalid(msg_id, f"{method} is a notification; send it without an id")
            return
        if method == INITIALIZE:
            if self.state != "new":
                self._reply_error(msg_id, INVALID_REQUEST, "initialize: already initialized")
                return
            self._initialize(msg_id, data.get("params"))
            return
        if self.state != "ready":
            if self.token_required:
                self._refuse(msg_id)
                return
            code, text = -32002, f"{method}: the server is not initialized (send initialize first)"
            if method in self._handlers.requests:
                code = -32026  # NotInitializedError: our own methods keep their code
            self._reply_error(msg_id, code, text)
            return
        if method == SHUTDOWN:
            self.state = "shutdown"  # now: an exit right behind it must see it
            self._spawn(key, msg_id, self._shutdown(key))
            return
        handler = self._handlers.requests.get(method)
        if handler is None:
            self._reply_error(msg_id, METHOD_NOT_FOUND, f"method not found: {method}")
            return
        if "params" not in data:
            self._reply_error(msg_id, INVALID_PARAMS, "params: missing (send {} for none)")
            return
        params = data["params"]
        if params == [] and self._handlers.all_optional(method):
            params = {}  # Lua clients encode an empty table as []
        if not isinstance(params, dict):
            self._reply_error(msg_id, INVALID_PARAMS, "params: expected an object")
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
                self._reply_error(msg_id, REQUEST_CANCELLED, "request cancelled")

        task.add_done_callback(done)

    async def _answer(self, msg_id: str | int, work: Coroutine[Any, Any, Any]) -> None:
        """Await one request's handler and write its one reply."""
        try:
            result = await work
        except asyncio.CancelledError:
            self._reply_error(msg_id, REQUEST_CANCELLED, "request cancelled")
            return
        except RpcError as exc:
            self._reply_error(msg_id, exc.code, exc.message)
            return
        except Exception:
            logger.exception("internal fault answering request %r", msg_id)
            self._reply_error(msg_id, INTERNAL_ERROR, "internal error")
            return
        try:
            if isinstance(result, RawJson):  # encoded already: spliced in, not re-encoded
                text = f'{{"jsonrpc":"2.0","id":{dumps(msg_id)},"result":{result.text}}}'
            else:
                text = dumps({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except (TypeError, ValueError):
            logger.exception("cannot encode the result of request %r", msg_id)
            self._reply_error(msg_id, INTERNAL_ERROR, "internal error: the result is not JSON")
            return
        self._write_text(text, reply_to=msg_id)

    def _initialize(self, msg_id: str | int, params: Any) -> None:
        """Answered inline, so that requests pipelined right behind it find it done."""
        if params == []:
            params = {}
        if not isinstance(params, dict):
            self._reply_error(msg_id, INVALID_PARAMS, "params: expected an object")
            return
        try:
            result = self._handlers.initialize(params, self)
        except RpcError as exc:
            if self.token_required and exc.code == INVALID_REQUEST:
                self._refused()
            self._reply_error(msg_id, exc.code, exc.message)
            return
        self.state = "ready"
        self._write_text(dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}), msg_id)

    def _refuse(self, msg_id: str | int) -> None:
        text = "connection refused: initialize with a valid initializationOptions.token first"
        self._reply_error(msg_id, INVALID_REQUEST, text)
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
        if not _valid_id(msg_id):
            logger.debug("ignored $/cancelRequest without a valid id")
            return
        task = self._incoming.get(_key(msg_id))
        if task is not None:
            task.cancel()

    def _route_reply(self, msg_id: Any, data: dict[str, Any]) -> None:
        """A reply to one of our requests: matched only by a pending id we issued."""
        future = self._outgoing.pop(msg_id, None) if isinstance(msg_id, str) else None
        if future is None or future.done():
            logger.debug("dropped a reply to an unknown or finished request id")
            return
        if "error" in data:
            error = data["error"]
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            if not (isinstance(code, int) and not isinstance(code, bool)):
                code = INTERNAL_ERROR
            if not isinstance(message, str):
                message = "the client answered with a malformed error"
            future.set_exception(PeerRequestError(code, message))
        else:
            future.set_result(data.get("result"))

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
        for future in self._outgoing.values():
            if not future.done():
                future.set_exception(PeerRequestError(INTERNAL_ERROR, "the client disconnected"))
        self._outgoing.clear()

    # -- outbound ------------------------------------------------------------------------

    def _write_text(self, text: str, reply_to: str | int | None = None) -> bool:
        """Frame and send ``text``; False (logged, nothing sent) when it is over the limit."""
        data = self._frame(text)
        if len(data) > self._max_frame:
            limit = self._max_frame
            logger.error("not sending a %d-byte frame: over the %d-byte limit", len(data), limit)
            if reply_to is not None:
                text = f"internal error: the reply would be {len(data)} bytes, over the limit"
                self._reply_error(reply_to, INTERNAL_ERROR, text)
            return False
        self._sink.write(data)
        return True

    def _invalid(self, msg_id: str | int | None, what: str) -> None:
        self._reply_error(msg_id, INVALID_REQUEST, f"invalid request: {what}")

    def _reply_error(self, msg_id: str | int | None, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        self._sink.write(self._frame(dumps(error)))

    # Peer (see _peer.py): what the run manager sends through the connection.

    def notify_json(self, method: str, params_text: str) -> None:
        self._write_text(f'{{"jsonrpc":"2.0","method":{dumps(method)},"params":{params_text}}}')

    def notify(self, method: str, params: Any) -> None:
        self.notify_json(method, dumps(params))

    def request(self, method: str, params: Any) -> tuple[str, asyncio.Future[Any]]:
        msg_id = f"{self._id_prefix}{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outgoing[msg_id] = future
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        if not self._write_text(dumps(message)):  # never sent: fail now, not at a timeout
            self._outgoing.pop(msg_id, None)
            text = (
                f"{method} was not sent: its params are over the {self._max_frame}-byte frame limit"
            )
            future.set_exception(PeerRequestError(INTERNAL_ERROR, text))
        return msg_id, future

    def cancel_request(self, msg_id: str, extra: dict[str, Any] | None = None) -> None:
        if self._outgoing.pop(msg_id, None) is not None:
            self.notify(CANCEL_REQUEST, {"id": msg_id, **(extra or {})})

    async def pace(self) -> None:
        await self._sink.pace()

    def progress(self, token: str | int, kind: str, message: str, percentage: int | None) -> None:
        """LSP work-done progress: ``kind`` is begin, report or end."""
        value: dict[str, Any] = {"kind": kind, "message": message}
        if kind == "begin":
            value.update(title="cleveragents run", cancellable=True, percentage=0)
        elif kind == "report" and percentage is not None:
            value["percentage"] = percentage
        self.notify(PROGRESS, {"token": token, "value": value})
