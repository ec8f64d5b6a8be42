"""Transports: read frames, write frames, and nothing else.

stdio (pipes, files, terminals, ``/dev/null``) or TCP (one authenticated client). Each
frame read goes to :meth:`Dispatcher.receive`; each frame written goes through a
:class:`StreamSink`, whose write buffer has a high-water mark that runs wait on
(:meth:`StreamSink.pace`). Every ending (end of input, ``exit``, a signal, a TCP reset)
goes through :func:`_serve_connection`'s ``finally``: the runs are cancelled, every
pending request is answered, and all queued output is flushed before the process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol import read_body
from ._dispatch import Dispatcher

if TYPE_CHECKING:
    from ._server import CleverAgentsServer

logger = logging.getLogger(__name__)

HIGH_WATER = 4 * 1024 * 1024
"""Bytes queued for a client before the runs that produce output wait for it to read."""
LOW_WATER = 1024 * 1024

EXIT_CODES = {"SIGTERM": 143, "SIGHUP": 129, "SIGINT": 130}


class StreamSink:
    """Frames out through an asyncio ``StreamWriter``, or blocking writes to a file."""

    def __init__(self, writer: asyncio.StreamWriter | None, fd: int | None = None) -> None:
        self._writer = writer
        self._fd = fd
        if writer is not None:
            writer.transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)

    def write(self, data: bytes) -> None:
        if self._writer is not None:
            if not self._writer.transport.is_closing():
                self._writer.write(data)
            return
        if self._fd is not None:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError as exc:  # a closed or full stdout: nothing more can be said
                logger.warning("cannot write to stdout: %s", exc)
                self._fd = None

    async def pace(self) -> None:
        writer = self._writer
        if writer is not None and writer.transport.get_write_buffer_size() > HIGH_WATER:
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    async def flush(self, timeout: float = 10.0) -> None:
        """Wait (bounded) until everything queued is written, then close."""
        writer = self._writer
        if writer is None:
            return
        try:
            async with asyncio.timeout(timeout):
                transport = writer.transport
                while transport.get_write_buffer_size() and not transport.is_closing():
                    await writer.drain()
                    if writer.transport.get_write_buffer_size():
                        await asyncio.sleep(0.01)
        except (TimeoutError, ConnectionError) as exc:
            logger.warning("could not flush all output before the end: %s", type(exc).__name__)
        writer.close()


async def _serve_connection(
    server: CleverAgentsServer,
    reader: asyncio.StreamReader,
    sink: StreamSink,
    stop: asyncio.Future[str],
    *,
    token_required: bool = False,
) -> tuple[Dispatcher, int]:
    """Read frames until end of input, ``exit``, a refusal or ``stop`` (a signal).
    Returns the dispatcher and the exit code."""
    dispatcher = Dispatcher(server, sink, token_required=token_required)

    async def read_frames() -> None:
        while True:
            body = await read_body(reader)
            if body is None:
                return
            dispatcher.receive(body)
            if dispatcher.ended.done():
                return

    reading = asyncio.ensure_future(read_frames())
    reason = "end of input"
    try:
        waits: list[asyncio.Future[Any]] = [reading, stop, dispatcher.ended]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if stop.done():
            reason = stop.result()
        elif dispatcher.ended.done():
            reason = "exit" if dispatcher.ended.result() >= 0 else "refused"
        elif reading.exception() is not None:
            logger.warning("connection lost: %s", type(reading.exception()).__name__)
            reason = "connection lost"
    finally:
        reading.cancel()
        if server.client is dispatcher:
            await server.manager.cancel_all(timeout=5.0, reason=reason)
            await server.close()
        await dispatcher.close()
        await sink.flush()
    if reason in EXIT_CODES:
        return dispatcher, EXIT_CODES[reason]
    code = dispatcher.exit_code
    return dispatcher, 0 if code is None else code  # end of input: 0


def _install_signals(stop: asyncio.Future[str]) -> Callable[[], None]:
    """SIGTERM, SIGHUP and SIGINT end the daemon cleanly (runs cancelled, replies sent)."""
    loop = asyncio.get_running_loop()
    installed: list[int] = []

    def on_signal(name: str) -> None:
        logger.warning("received %s: cancelling the runs and stopping", name)
        if not stop.done():
            stop.set_result(name)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, on_signal, sig.name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def remove() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return remove


def _keepalive(writer: asyncio.StreamWriter) -> None:
    """Notice a client that vanished without closing (a dead host, a cut cable)."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    except OSError:
        pass


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


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
            try:
                if not chunk:
                    loop.call_soon_threadsafe(reader.feed_eof)
                    return
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            except RuntimeError:  # the loop has closed
                return

    threading.Thread(target=pump, name="cleveragents-stdin", daemon=True).start()


async def open_stdio(reader: asyncio.StreamReader) -> StreamSink:
    """Feed stdin into ``reader`` and return the sink that writes to stdout, whether each
    is a pipe, a file, a terminal or ``/dev/null`` (both faces, LSP and ACP, use it)."""
    loop = asyncio.get_running_loop()
    in_fd, out_fd = sys.stdin.fileno(), sys.stdout.fileno()
    if _is_pipe(in_fd):
        stdin = os.fdopen(in_fd, "rb", buffering=0, closefd=False)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    else:
        _feed_from_thread(in_fd, reader, loop)
    if not _is_pipe(out_fd):
        return StreamSink(None, out_fd)
    stdout = os.fdopen(out_fd, "wb", buffering=0, closefd=False)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    return StreamSink(asyncio.StreamWriter(transport, protocol, None, loop))


async def serve_stdio(server: CleverAgentsServer) -> int:
    stop: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    remove_signals = _install_signals(stop)
    reader = asyncio.StreamReader()  # the frame reader bounds its own buffer
    sink = await open_stdio(reader)
    try:
        _, code = await _serve_connection(server, reader, sink, stop)
    finally:
        remove_signals()
    return code


def load_token(token_file: Path | None, state_dir: Path) -> str:
    """The ``--tcp`` token: ``CLEVERAGENTS_TOKEN``, else the token file (created with mode
    0600 and a random token when missing), by default ``STATE_DIR/tcp-token``."""
    from_env = os.environ.get("CLEVERAGENTS_TOKEN", "").strip()
    if from_env and token_file is None:
        return from_env
    path = token_file or state_dir / "tcp-token"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        text = ""
    if not text:
        import secrets

        text = secrets.token_urlsafe(32)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        logger.warning("created the TCP token file %s (mode 0600)", path)
    else:
        logger.warning("the TCP token is in %s", path)
    return text


async def serve_tcp(server: CleverAgentsServer, host: str, port: int, token: str) -> int:
    """Serve the first client that authenticates, then stop (one editor, one daemon).
    Connections without the token are refused and closed; the daemon keeps listening."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    stop: asyncio.Future[str] = loop.create_future()
    remove_signals = _install_signals(stop)
    server.token = token

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if server.client is not None:  # one client per daemon
            logger.warning("refusing another TCP client: one is connected")
            writer.close()
            return
        _keepalive(writer)
        sink = StreamSink(writer)
        try:
            dispatcher, code = await _serve_connection(
                server, reader, sink, stop, token_required=True
            )
        except Exception:
            logger.exception("TCP connection failed")
            return
        if server.client is dispatcher and not done.done():
            done.set_result(code)
        elif stop.done() and not done.done():
            done.set_result(EXIT_CODES.get(stop.result(), 1))
        else:
            logger.warning("a TCP client left without authenticating")

    listener = await asyncio.start_server(on_client, host, port)
    address = listener.sockets[0].getsockname()
    logger.warning("cleveragents listening on %s:%s", address[0], address[1])
    try:
        async with listener:
            waits: list[asyncio.Future[Any]] = [done, stop]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if not done.done() and server.client is not None:
                # A signal: the client's connection is ending its runs; let it finish.
                await asyncio.wait([done], timeout=15.0)
            if not done.done():  # a signal with no client connected
                return EXIT_CODES.get(stop.result(), 1)
            return done.result()
    finally:
        remove_signals()
