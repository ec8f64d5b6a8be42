"""The stdio transport of an MCP server: spawn it, frame its stdout, feed its stdin,
notice its death, and stop it with its whole process group.

Written here rather than taken from the SDK's ``stdio_client`` for three reasons:
- the environment is exactly the caller's (the SDK adds ``HOME``, ``PATH``, ``USER``...
  from the daemon's own ``os.environ``);
- a stdout line that is not JSON-RPC is logged and skipped (the SDK logs a traceback per
  line and hands an exception to the session);
- the process's exit is watched, so a server that dies while idle is known at once.

stderr goes straight from the child into its log file (see ``_logfile``). Imports the
SDK's message types and anyio: only ever loaded through ``_connection``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence

import anyio
import anyio.abc
import attrs
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ._logfile import ServerLog

logger = logging.getLogger("cleveragents.mcp")

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer stdout line is skipped (and logged) instead of buffered without end."""
NOTED_LINES = 100
"""Skipped stdout lines copied into the server's log; later ones are only counted."""
STDIN_CLOSE_GRACE_S = 1.0
"""How long a server gets to exit on its own once its stdin is closed."""
SIGNAL_GRACE_S = 1.0
"""How long after SIGTERM before SIGKILL, and after SIGKILL before giving up."""
EXIT_AFTER_EOF_S = 1.0
"""How long to wait for an exit code once stdout has ended."""
EOF_AFTER_EXIT_S = 0.5
"""How long stdout may stay open after the process exited (a child holding it)."""


@attrs.define(eq=False)
class StdioChannel:
    """A running server process and the two message streams of its session."""

    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: MemoryObjectSendStream[SessionMessage]
    process: anyio.abc.Process
    closed: anyio.Event = attrs.field(factory=anyio.Event)
    """Set when the server's stdout ended or the process exited: the connection is over."""
    exited: anyio.Event = attrs.field(factory=anyio.Event)
    skipped_lines: int = 0

    async def ending(self) -> str:
        """Why the connection ended, in words (waits briefly for the exit code)."""
        with anyio.move_on_after(EXIT_AFTER_EOF_S):
            await self.exited.wait()
        return describe_exit(self.process.returncode)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "the server closed its stdout"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the server was killed by {name}"
    return f"the server exited with code {code}"


@contextlib.asynccontextmanager
async def stdio_channel(
    name: str,
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    log: ServerLog,
) -> AsyncIterator[StdioChannel]:
    """Spawn ``command`` in a new session (its own process group) with exactly ``env``.

    Raises ``OSError`` when it cannot be spawned. On exit, closes its stdin, gives it
    ``STDIN_CLOSE_GRACE_S`` to exit, then SIGTERMs and SIGKILLs the group; whatever is
    left in the group is killed even when the leader exited by itself.
    """
    errlog = log.open_for_child(" ".join([command, *args]).replace("\n", " ")[:500])
    try:
        process = await anyio.open_process(
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        errlog.close()
    read_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    channel = StdioChannel(read_stream, write_stream, process)
    pump = _Pump(name, channel, read_send, write_receive, log)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pump.read_stdout)
        tasks.start_soon(pump.write_stdin)
        tasks.start_soon(pump.watch_exit)
        try:
            yield channel
        finally:
            with anyio.CancelScope(shield=True):
                await pump.shutdown()
            tasks.cancel_scope.cancel()


class _Pump:
    """The three tasks of a channel and its shutdown."""

    def __init__(
        self,
        name: str,
        channel: StdioChannel,
        read_send: MemoryObjectSendStream[SessionMessage | Exception],
        write_receive: MemoryObjectReceiveStream[SessionMessage],
        log: ServerLog,
    ) -> None:
        self.name = name
        self.channel = channel
        self.read_send = read_send
        self.write_receive = write_receive
        self.log = log
        self.stdout_ended = anyio.Event()
        self.writer_done = anyio.Event()
        self.session_gone = False

    async def read_stdout(self) -> None:
        """Split stdout into lines and hand each JSON-RPC message to the session.

        Keeps reading (and dropping) after the session is gone, so a server still
        writing can reach the end of its stdin and exit."""
        stdout = self.channel.process.stdout
        assert stdout is not None
        parts: list[bytes] = []
        size = 0
        dropping = False  # inside a line over MAX_LINE_BYTES
        try:
            async with self.read_send:
                async for chunk in stdout:
                    start = 0
                    while (end := chunk.find(b"\n", start)) >= 0:
                        parts.append(chunk[start:end])
                        line = b"".join(parts)
                        parts.clear()
                        size = 0
                        start = end + 1
                        if dropping:
                            dropping = False
                            continue
                        await self._deliver(line)
                    if start < len(chunk) and not dropping:
                        parts.append(chunk[start:])
                        size += len(chunk) - start
                        if size > MAX_LINE_BYTES:
                            parts.clear()
                            size = 0
                            dropping = True
                            self._skipped(b"", f"a line over {MAX_LINE_BYTES} bytes")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            self.stdout_ended.set()
            self.channel.closed.set()
            if self.channel.skipped_lines > NOTED_LINES:
                self.log.note(
                    f"[cleveragents] {self.channel.skipped_lines} stdout lines in all were "
                    "not JSON-RPC and were skipped"
                )

    async def _deliver(self, line: bytes) -> None:
        line = line.rstrip(b"\r")
        if not line.strip():
            return
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:  # pydantic's ValidationError is a ValueError
            self._skipped(line, "not JSON-RPC")
            return
        if self.session_gone:
            return
        try:
            await self.read_send.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.session_gone = True

    def _skipped(self, line: bytes, why: str) -> None:
        channel = self.channel
        channel.skipped_lines += 1
        if channel.skipped_lines <= NOTED_LINES:
            text = line[:1000].decode(errors="replace")
            self.log.note(f"[cleveragents] skipped a stdout line ({why}): {text}")
        if channel.skipped_lines <= 10:
            logger.warning(
                "MCP server %s: skipped a stdout line (%s): %r",
                self.name, why, line[:200].decode(errors="replace"),
            )  # fmt: skip
        elif channel.skipped_lines == 11:
            logger.warning(
                "MCP server %s: more stdout lines that are not JSON-RPC; see its log", self.name
            )

    async def write_stdin(self) -> None:
        stdin = self.channel.process.stdin
        assert stdin is not None
        try:
            async with self.write_receive:
                async for item in self.write_receive:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading (it died or closed stdin): the connection is over.
            self.channel.closed.set()
        finally:
            self.writer_done.set()

    async def watch_exit(self) -> None:
        await self.channel.process.wait()
        self.channel.exited.set()
        # Let the reader deliver what the server wrote before it exited; a child that
        # inherited stdout may keep it open, and the connection is over all the same.
        with anyio.move_on_after(EOF_AFTER_EXIT_S):
            await self.stdout_ended.wait()
        self.channel.closed.set()
        if not self.stdout_ended.is_set():
            await self.read_send.aclose()

    async def shutdown(self) -> None:
        """Close stdin, wait, then SIGTERM and SIGKILL the process group (bounded)."""
        channel = self.channel
        channel.write_stream.close()
        with anyio.move_on_after(0.5):
            await self.writer_done.wait()
        process = channel.process
        if process.stdin is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
        with anyio.move_on_after(STDIN_CLOSE_GRACE_S):
            await channel.exited.wait()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if channel.exited.is_set():
                break
            _signal_group(process.pid, sig)
            with anyio.move_on_after(SIGNAL_GRACE_S):
                await channel.exited.wait()
        if not channel.exited.is_set():
            logger.warning("MCP server %s (pid %d) outlived SIGKILL", self.name, process.pid)
        _signal_group(process.pid, signal.SIGKILL)  # whatever the leader left behind
        channel.closed.set()
        with anyio.move_on_after(SIGNAL_GRACE_S):
            await process.aclose()
        channel.read_stream.close()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group ``pid`` leads (it was started in its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
