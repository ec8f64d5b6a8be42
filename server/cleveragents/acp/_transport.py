"""ACP on stdio: lines in, lines out, and every ending handled as the daemon's is.

The pipes, the write buffer with its high-water mark, and the signal handling are the
ones both faces share (:mod:`cleveragents.rpc`); only the reading differs (lines, not
frames).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..rpc import EXIT_CODES, StreamSink, install_signals, open_stdio
from ._rpc import AcpDispatcher, read_lines

if TYPE_CHECKING:
    from ._agent import AcpAgent

logger = logging.getLogger(__name__)


async def serve_stdio(agent: AcpAgent) -> int:
    """Serve one client on stdin/stdout until end of input or a signal."""
    stop: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    remove_signals = install_signals(stop)
    reader = asyncio.StreamReader(limit=2**31)  # read_lines bounds what it keeps
    sink = await open_stdio(reader)
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
