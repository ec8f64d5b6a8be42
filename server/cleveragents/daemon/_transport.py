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
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol import read_body
from ..rpc import EXIT_CODES, Dispatcher, StreamSink, install_signals, keepalive, open_stdio

if TYPE_CHECKING:
    from ._server import CleverAgentsServer

logger = logging.getLogger(__name__)


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
            await server.close(reason)
        await dispatcher.close()
        await sink.flush()
    if reason in EXIT_CODES:
        return dispatcher, EXIT_CODES[reason]
    code = dispatcher.exit_code
    return dispatcher, 0 if code is None else code  # end of input: 0


async def serve_stdio(server: CleverAgentsServer) -> int:
    stop: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    remove_signals = install_signals(stop)
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
    remove_signals = install_signals(stop)
    server.token = token

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if server.client is not None:  # one client per daemon
            logger.warning("refusing another TCP client: one is connected")
            writer.close()
            return
        keepalive(writer)
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
