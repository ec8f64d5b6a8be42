"""What the daemon writes on one connection: frames within the limit, error replies, and
the daemon's own side of the ``Peer`` (notifications, its requests to the client and
their replies, work-done progress).

The daemon's own requests (``tools/call``, ``permission/request``, ``llm/generate``)
live in their own table, with ids no client can guess: a reply is matched only by a
pending id the daemon issued.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

from ..protocol import MAX_BODY, RpcError, dumps
from ..tool import JsonRpcCode

logger = logging.getLogger(__name__)

CANCEL_REQUEST = "$/cancelRequest"
PROGRESS = "$/progress"


class FrameSink(Protocol):
    """Where frames go (the transport)."""

    def write(self, data: bytes) -> None: ...

    async def pace(self) -> None:
        """Wait while the write buffer is over its high-water mark."""
        ...


class Outbound:
    """The writing side of one connection, and the daemon's ``Peer`` on it."""

    def __init__(
        self, sink: FrameSink, frame: Callable[[str], bytes], max_frame: int | None
    ) -> None:
        self._sink = sink
        self._frame = frame
        """JSON text -> the bytes of one message (LSP framing; another face passes its own)."""
        self._max_frame = MAX_BODY if max_frame is None else max_frame
        """The largest frame written (default: the 64 MiB both sides read)."""
        self._outgoing: dict[str, asyncio.Future[Any]] = {}
        self._id_prefix = f"ca-{os.urandom(6).hex()}-"  # secrets.token_hex's bytes
        self._ids = itertools.count(1)

    def _write_text(self, text: str, reply_to: str | int | None = None) -> bool:
        """Frame and send ``text``; False (logged, nothing sent) when it is over the limit."""
        data = self._frame(text)
        if len(data) > self._max_frame:
            limit = self._max_frame
            logger.error("not sending a %d-byte frame: over the %d-byte limit", len(data), limit)
            if reply_to is not None:
                text = f"internal error: the reply would be {len(data)} bytes, over the limit"
                self._reply_error(reply_to, JsonRpcCode.INTERNAL_ERROR, text)
            return False
        self._sink.write(data)
        return True

    def _invalid(self, msg_id: str | int | None, what: str) -> None:
        self._reply_error(msg_id, JsonRpcCode.INVALID_REQUEST, f"invalid request: {what}")

    def _reply_error(self, msg_id: str | int | None, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": int(code), "message": message}}
        self._sink.write(self._frame(dumps(error)))

    # -- replies to the daemon's own requests ----------------------------------------------

    def route_reply(self, msg_id: Any, data: dict[str, Any]) -> None:
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
                code = JsonRpcCode.INTERNAL_ERROR
            if not isinstance(message, str):
                message = "the client answered with a malformed error"
            future.set_exception(RpcError(code, message))
        else:
            future.set_result(data.get("result"))

    def fail_reply(self, msg_id: Any, error: RpcError) -> None:
        """A reply to one of our requests that cannot be read fails that request."""
        future = self._outgoing.pop(msg_id, None) if isinstance(msg_id, str) else None
        if future is not None and not future.done():
            future.set_exception(error)

    def fail_outgoing(self, message: str) -> None:
        """Fail every request of ours still waiting (the connection ends)."""
        for future in self._outgoing.values():
            if not future.done():
                future.set_exception(RpcError(JsonRpcCode.INTERNAL_ERROR, message))
        self._outgoing.clear()

    # -- Peer (see _peer.py): what the run manager sends through the connection -----------

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
            future.set_exception(RpcError(JsonRpcCode.INTERNAL_ERROR, text))
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
