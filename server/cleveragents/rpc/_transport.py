"""The process plumbing both JSON-RPC faces share: stdin and stdout whatever they are
(pipes, files, terminals, ``/dev/null``), a write buffer whose high-water mark runs wait
on (:meth:`StreamSink.pace`), TCP keepalive, the signals that end a process cleanly and
the exit codes they give.
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


def install_signals(stop: asyncio.Future[str]) -> Callable[[], None]:
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


def keepalive(writer: asyncio.StreamWriter) -> None:
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
