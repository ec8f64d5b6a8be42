"""The client's transport: a JSON-RPC peer with LSP framing over the daemon's stdio.

Requests, notifications, and the daemon's own requests (``tools/call``,
``permission/request``, ``llm/generate``) answered by registered handlers. It knows the
JSON-RPC envelope and ``$/cancelRequest``, not the methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol import RpcError as RpcError  # re-exported: the one JSON-RPC error class
from ..protocol import frame, read_body
from ..tool import JsonRpcCode

logger = logging.getLogger(__name__)

RequestHandler = Callable[[dict[str, Any]], Awaitable[Any]]
NotificationHandler = Callable[[str, dict[str, Any]], None]


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message as a dict; ``None`` at end of input (non-objects are skipped)."""
    while True:
        body = await read_body(reader)
        if body is None:
            return None
        message = json.loads(body)
        if isinstance(message, dict):
            return message


class DaemonConnection:
    """The client's one framed JSON-RPC connection to a daemon (its stdio)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._handlers: dict[str, RequestHandler] = {}
        self._inflight: dict[Any, asyncio.Task[None]] = {}
        self.notification_handlers: list[NotificationHandler] = []
        self._reader_task: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    def start(self) -> None:
        self._reader_task = asyncio.create_task(self._read_loop())

    def handle(self, method: str, handler: RequestHandler) -> None:
        self._handlers[method] = handler

    def _write(self, message: dict[str, Any]) -> None:
        if not self._writer.is_closing():
            self._writer.write(frame(message))

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def send_request(
        self, method: str, params: dict[str, Any] | None
    ) -> tuple[int, asyncio.Future[Any]]:
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)
        return msg_id, future

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send a request and await its result; ``RpcError`` on an error reply. If the
        awaiting task is cancelled, ``$/cancelRequest`` is sent for it."""
        msg_id, future = self.send_request(method, params)
        try:
            # Shielded: awaiting the future itself would cancel it with the task, and the
            # check below would then never see it pending.
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():
                future.cancel()
                self.notify("$/cancelRequest", {"id": msg_id})
            raise
        finally:
            self._pending.pop(msg_id, None)

    async def _read_loop(self) -> None:
        try:
            while True:
                message = await read_frame(self._reader)
                if message is None:
                    break
                self._dispatch(message)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
            logger.debug("connection ended: %s", exc)
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("the daemon closed the connection"))

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:  # a response
            future = self._pending.pop(message.get("id"), None)
            if future is None or future.done():
                return
            error = message.get("error")
            if error is not None:
                future.set_exception(
                    RpcError(error.get("code", 0), error.get("message", ""), error.get("data"))
                )
            else:
                future.set_result(message.get("result"))
            return
        params = message.get("params") or {}
        if "id" not in message:
            if method == "$/cancelRequest":
                task = self._inflight.get(params.get("id"))
                if task is not None:
                    task.cancel()
                return
            for handler in self.notification_handlers:
                handler(method, params)
            return
        msg_id = message["id"]
        self._inflight[msg_id] = asyncio.create_task(self._answer(msg_id, method, params))

    async def _answer(self, msg_id: Any, method: str, params: dict[str, Any]) -> None:
        handler = self._handlers.get(method)
        try:
            if handler is None:
                if method == "window/workDoneProgress/create":
                    self._write({"jsonrpc": "2.0", "id": msg_id, "result": None})
                    return
                raise RpcError(JsonRpcCode.METHOD_NOT_FOUND, f"method not found: {method}")
            result = await handler(params)
            self._write({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except asyncio.CancelledError:
            self._error(msg_id, JsonRpcCode.REQUEST_CANCELLED, "request cancelled")
        except RpcError as exc:
            self._error(msg_id, exc.code, exc.message)
        except Exception as exc:
            logger.exception("handler for %s failed", method)
            self._error(msg_id, JsonRpcCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            self._inflight.pop(msg_id, None)

    def _error(self, msg_id: Any, code: int, message: str) -> None:
        # int(): the wire carries a plain integer whatever enum the code came as.
        error = {"code": int(code), "message": message}
        self._write({"jsonrpc": "2.0", "id": msg_id, "error": error})

    async def close(self) -> None:
        if not self._writer.is_closing():
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
