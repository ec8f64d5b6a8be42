"""Transports: read frames, write frames, and nothing else.

stdio (pipes, files, terminals, ``/dev/null``) or TCP (one authenticated client; what
comes before authentication is the :class:`TcpGate`'s). Each frame read goes to
:meth:`Dispatcher.receive`; each frame written goes through a
:class:`StreamSink`, whose write buffer has a high-water mark that runs wait on
(:meth:`StreamSink.pace`). Every ending (end of input, ``exit``, a signal, a TCP reset)
goes through :func:`_serve_connection`'s ``finally``: the runs are cancelled, every
pending request is answered, and all queued output is flushed before the process ends.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol import read_body
from ..rpc import EXIT_CODES, Dispatcher, StreamSink, install_signals, keepalive, open_stdio
from ._tcp_gate import GateLimits, TcpGate, TokenError, check_token

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
    first: bytes | None = None,
) -> tuple[Dispatcher, int]:
    """Read frames until end of input, ``exit``, a refusal or ``stop`` (a signal);
    ``first`` is a frame read already (TCP's ``initialize``). Returns the dispatcher and
    the exit code."""
    dispatcher = Dispatcher(server, sink, token_required=token_required)

    async def read_frames() -> None:
        if first is not None:
            dispatcher.receive(first)
            if dispatcher.ended.done():
                return
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


TOKEN_ENV = "CLEVERAGENTS_TOKEN"
_MAX_TOKEN_FILE = 4096


def load_token(token_file: Path | None, state_dir: Path) -> str:
    """The ``--tcp`` token: ``CLEVERAGENTS_TOKEN``, else the token file (by default
    ``STATE_DIR/tcp-token``), created 0600 with a random token when missing or empty.

    Raises :class:`TokenError` for a token under ``MIN_TOKEN_CHARS`` characters and for a
    token file that is not a regular file. Its path is logged, never the token."""
    from_env = os.environ.get(TOKEN_ENV, "").strip()
    if from_env and token_file is None:
        return check_token(from_env, TOKEN_ENV)
    path = token_file or state_dir / "tcp-token"
    # A named file may be a link (a mounted secret often is); the default one, inside
    # the state dir, is never followed.
    found = _read_token_file(path, follow=token_file is not None)
    if found:
        logger.warning(
            "the TCP token is in %s (the client sends it as initializationOptions.token)", path
        )
        return check_token(found, f"the token file {path}")
    import secrets  # only a --tcp daemon without a token makes one

    text = secrets.token_urlsafe(32)
    _write_token_file(path, text, follow=token_file is not None, exists=found is not None)
    logger.warning(
        "created the TCP token file %s (mode 0600); the client sends its contents as "
        "initializationOptions.token", path,
    )  # fmt: skip
    return text


def _read_token_file(path: Path, *, follow: bool) -> str | None:
    """The stripped text of the token file, or ``None`` when there is none."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TokenError(f"cannot read the token file {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TokenError(f"the token file {path} is not a regular file")
        if info.st_size > _MAX_TOKEN_FILE:
            raise TokenError(f"the token file {path} is over {_MAX_TOKEN_FILE} bytes")
        if stat.S_IMODE(info.st_mode) & 0o077:
            logger.warning(
                "the token file %s can be read by other users (mode %o): chmod 600 it",
                path, stat.S_IMODE(info.st_mode),
            )  # fmt: skip
        data = os.read(fd, _MAX_TOKEN_FILE + 1)
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").strip()


def _write_token_file(path: Path, text: str, *, follow: bool, exists: bool) -> None:
    """A new token file (0600, its folder 0700 when created), or an empty one filled."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    if exists:
        flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | nofollow
    else:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | nofollow
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise TokenError(f"cannot write the token file {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TokenError(f"the token file {path} is not a regular file")
        data = (text + "\n").encode()
        if os.write(fd, data) != len(data):
            raise TokenError(f"cannot write the token file {path}: short write")
    finally:
        os.close(fd)


async def serve_tcp(
    server: CleverAgentsServer,
    host: str,
    port: int,
    token: str,
    *,
    limits: GateLimits | None = None,
    listening: Callable[[tuple[str, int]], None] | None = None,
) -> int:
    """Serve the first client that authenticates, then stop (one editor, one daemon).

    Until then every connection goes through the :class:`TcpGate` (one small frame, a
    valid token, in time; else closed unanswered); once a client is in, any other
    connection is closed at accept. ``listening`` is told the address bound."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    stop: asyncio.Future[str] = loop.create_future()
    remove_signals = install_signals(stop)
    server.token = token
    gate = TcpGate(token, limits)

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if server.client is not None:  # one client per daemon
            logger.info("refusing another TCP client: one is connected")
            writer.close()
            return
        first = await gate.admit(reader, writer)
        if first is None:
            return
        if server.client is not None:
            logger.warning("refusing a TCP client with the token: another one is connected")
            writer.close()
            return
        keepalive(writer)
        sink = StreamSink(writer)
        try:
            dispatcher, code = await _serve_connection(
                server, reader, sink, stop, token_required=True, first=first
            )
        except Exception:
            logger.exception("TCP connection failed")
            return
        if server.client is dispatcher and not done.done():
            done.set_result(code)
        elif stop.done() and not done.done():
            done.set_result(EXIT_CODES.get(stop.result(), 1))
        else:
            logger.warning("a TCP client with the token left before initialize succeeded")

    listener = await asyncio.start_server(on_client, host, port)
    address = listener.sockets[0].getsockname()
    logger.warning("cleveragents listening on %s:%s", address[0], address[1])
    if listening is not None:
        listening((address[0], address[1]))
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
