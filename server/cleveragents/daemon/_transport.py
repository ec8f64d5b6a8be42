"""LSP base framing over asyncio streams (stdio pipes or one TCP connection).

pygls's own stdio reader hops to a thread for every read and drops what it cannot
parse. This loop reads frames on the event loop and answers every request, including
the ones pygls would leave unanswered: malformed JSON (-32700, ``id: null``), a
non-object message (-32600), a request without ``params`` (-32602), and any request
after ``shutdown`` (-32600). Valid messages go to the pygls protocol unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
import threading
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcException

from ..protocol import BY_NAME, MAX_BODY, frame, read_body

if TYPE_CHECKING:
    from ._server import CleverAgentsServer

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


class _Writer:
    """What pygls writes through: the transport's buffered, non-blocking write."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._transport.close()


class Connection:
    """One client connection: reads frames and hands them to the server's protocol."""

    def __init__(self, server: CleverAgentsServer, transport: asyncio.WriteTransport) -> None:
        self.server = server
        self.transport = transport
        self.exit_code = 0
        server.protocol.set_writer(_Writer(transport), include_headers=True)

    def reply_error(self, msg_id: Any, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        if not self.transport.is_closing():
            self.transport.write(frame(error))

    def dispatch(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            self.reply_error(None, PARSE_ERROR, f"parse error: {exc}")
            return
        if not isinstance(data, dict):
            kind = "batch requests are not supported" if isinstance(data, list) else "not an object"
            self.reply_error(None, INVALID_REQUEST, f"invalid request: {kind}")
            return
        msg_id = data.get("id")
        method = data.get("method")
        is_request = "id" in data and method is not None
        if data.get("jsonrpc") != "2.0":
            if "id" in data:
                self.reply_error(msg_id, INVALID_REQUEST, "invalid request: jsonrpc must be '2.0'")
            return
        if method is not None and not isinstance(method, str):
            self.reply_error(msg_id, INVALID_REQUEST, "invalid request: method must be a string")
            return
        if is_request and not isinstance(msg_id, (str, int)):
            self.reply_error(
                None, INVALID_REQUEST, "invalid request: id must be a string or integer"
            )
            return
        protocol = self.server.protocol
        if method is None and "id" in data:  # a reply to one of our requests
            protocol._handle_response(msg_id, data.get("result"), data.get("error"))
            return
        if is_request and protocol._shutdown and method != "exit":
            self.reply_error(msg_id, INVALID_REQUEST, f"{method}: the server is shutting down")
            return
        if is_request and method in BY_NAME:
            params = data.get("params")
            if "params" not in data:
                self.reply_error(msg_id, INVALID_PARAMS, "params: missing (send {} for none)")
                return
            if not isinstance(params, dict):
                self.reply_error(msg_id, INVALID_PARAMS, "params: expected an object")
                return
        try:
            message = protocol.structure_message(data)
        except JsonRpcException as exc:
            if is_request:
                self.reply_error(msg_id, exc.code, f"{method}: invalid params")
            return
        except Exception:
            logger.exception("cannot read message %s", method)
            if is_request:
                self.reply_error(msg_id, INVALID_REQUEST, f"{method}: invalid request")
            return
        protocol.handle_message(message)

    async def serve(self, reader: asyncio.StreamReader) -> int:
        """Read until end of input or ``exit``; then cancel the runs left. Returns the
        process exit code (LSP: 0 after shutdown, else 1 on ``exit``)."""
        try:
            while True:
                body = await read_body(reader)
                if body is None:
                    break
                if b'"exit"' in body:
                    # A client may send exit right behind shutdown without waiting: let
                    # the requests already in hand finish first (bounded).
                    await self._finish_requests(1.0)
                try:
                    self.dispatch(body)
                except SystemExit as stop:  # pygls's exit handler
                    self.exit_code = stop.code if isinstance(stop.code, int) else 0
                    break
        finally:
            await self.server.manager.cancel_all()
            await self._finish_requests(0.5)
        return self.exit_code

    async def _finish_requests(self, timeout: float) -> None:
        """Wait (bounded) for the handlers of requests received so far to answer."""
        pending: list[Any] = list(self.server.protocol._request_futures.values())
        handlers = [f for f in pending if isinstance(f, asyncio.Task)]
        if handlers:
            await asyncio.wait(handlers, timeout=timeout)


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _FileWriter:
    """Stdout that is a file or a terminal rather than a pipe: plain blocking writes
    (asyncio's pipe transport refuses these)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._closed = False

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True


def _feed_from_thread(
    fd: int, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop
) -> None:
    """Stdin that is a file, a terminal or /dev/null: read it in a daemon thread."""

    def pump() -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                loop.call_soon_threadsafe(reader.feed_eof)
                return
            loop.call_soon_threadsafe(reader.feed_data, chunk)

    threading.Thread(target=pump, name="cleveragents-stdin", daemon=True).start()


async def serve_stdio(server: CleverAgentsServer) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_BODY)
    in_fd, out_fd = sys.stdin.fileno(), sys.stdout.fileno()
    if _is_pipe(in_fd):
        stdin = os.fdopen(in_fd, "rb", buffering=0, closefd=False)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    else:
        _feed_from_thread(in_fd, reader, loop)
    transport: Any
    if _is_pipe(out_fd):
        stdout = os.fdopen(out_fd, "wb", buffering=0, closefd=False)
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, stdout)
    else:
        transport = _FileWriter(out_fd)
    connection = Connection(server, transport)
    code = await connection.serve(reader)
    transport.close()
    return code


async def serve_tcp(server: CleverAgentsServer, host: str, port: int) -> int:
    """Serve the first client that connects, then stop (one editor, one daemon)."""
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    taken = False

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal taken
        if taken:  # one client per daemon: a second one must not steal the first's output
            logger.warning("refusing a second TCP client")
            writer.close()
            return
        taken = True
        connection = Connection(server, writer.transport)
        code = await connection.serve(reader)
        writer.close()
        if not done.done():
            done.set_result(code)

    listener = await asyncio.start_server(on_client, host, port, limit=MAX_BODY)
    address = listener.sockets[0].getsockname()
    logger.warning("cleveragents listening on %s:%s", address[0], address[1])
    async with listener:
        return await done
