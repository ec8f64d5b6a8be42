"""ACP on stdio: lines in, lines out, and every ending handled as the daemon's is.

The pipes, the write buffer with its high-water mark, and the signal handling are the
daemon's (``daemon/_transport.py``); only the reading differs (lines, not frames).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from ..daemon._transport import (
    EXIT_CODES,
    StreamSink,
    _feed_from_thread,
    _install_signals,
    _is_pipe,
)
from ._rpc import AcpDispatcher, read_lines

if TYPE_CHECKING:
    from ._agent import AcpAgent

logger = logging.getLogger(__name__)


async def serve_stdio(agent: AcpAgent) -> int:
    """Serve one client on stdin/stdout until end of input or a signal."""
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[str] = loop.create_future()
    remove_signals = _install_signals(stop)
    reader = asyncio.StreamReader(limit=2**31)  # read_lines bounds what it keeps
    in_fd, out_fd = sys.stdin.fileno(), sys.stdout.fileno()
    if _is_pipe(in_fd):
        stdin = os.fdopen(in_fd, "rb", buffering=0, closefd=False)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    else:
        _feed_from_thread(in_fd, reader, loop)
    if _is_pipe(out_fd):
        stdout = os.fdopen(out_fd, "wb", buffering=0, closefd=False)
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, stdout
        )
        sink = StreamSink(asyncio.StreamWriter(transport, protocol, None, loop))
    else:
        sink = StreamSink(None, out_fd)
    try:
        return await serve_connection(agent, reader, sink, stop)
    finally:
        remove_signals()


async def serve_connection(
    agent: AcpAgent, reader: asyncio.StreamReader, sink: StreamSink, stop: asyncio.Future[str]
) -> int:
    dispatcher = AcpDispatcher(agent, sink)

    async def read() -> None:
        async for item in read_lines(reader):
            dispatcher.receive_line(item)

    reading = asyncio.ensure_future(read())
    reason = "end of input"
    try:
        waits: list[asyncio.Future[Any]] = [reading, stop]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if stop.done():
            reason = stop.result()
        elif reading.exception() is not None:
            logger.warning("connection lost: %s", type(reading.exception()).__name__)
    finally:
        reading.cancel()
        await agent.close(reason)
        await dispatcher.close()
        await sink.flush()
    return EXIT_CODES.get(reason, 0)
