"""The stdio transport of an MCP server: spawn it, frame its stdout, feed its stdin,
notice its death, and stop it with its whole process tree.

On Linux the server runs behind a reaper (``_reaper``, a child subreaper): the server's
descendants stay its descendants whatever sessions they make, and all of them end when
the server ends or is stopped, ``setsid`` ones included, also when the daemon itself is
killed. Elsewhere the server's process group is what is killed.

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
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

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
REAPER = Path(__file__).with_name("_reaper.py")
REAPER_STOP_S = 3.0
"""How long the reaper gets to end the server's tree once asked (its own grace between
SIGTERM and SIGKILL is 1 s), before it and the server's group are SIGKILLed."""
REPORT_S = 10.0
"""How long the reaper may take to say whether the server started."""


def reaper_available() -> bool:
    """Whether servers run behind the reaper here (Linux, with the reaper's file)."""
    return sys.platform.startswith("linux") and REAPER.is_file()


@attrs.define(eq=False)
class StdioChannel:
    """A running server process and the two message streams of its session."""

    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: MemoryObjectSendStream[SessionMessage]
    process: anyio.abc.Process
    """The reaper when there is one (its exit status is the server's), else the server."""
    server_pid: int | None = None
    """The server's own pid (its process group's id), behind a reaper."""
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
    """Spawn ``command`` with exactly ``env``: behind the reaper, in a new session, when
    :func:`reaper_available`; else itself in a new session (its own process group).

    Raises ``OSError`` when it cannot be spawned. On exit, closes its stdin, gives it
    ``STDIN_CLOSE_GRACE_S`` to exit, then asks the reaper to end its tree (SIGTERM, then
    SIGKILL), or SIGTERMs and SIGKILLs its group when there is no reaper.
    """
    argv = [command, *args]
    report_r = report_w = -1
    if reaper_available():
        report_r, report_w = os.pipe()
        argv = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), str(report_w), "--",
                *argv]  # fmt: skip
    errlog = log.open_for_child(" ".join([command, *args]).replace("\n", " ")[:500])
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog if errlog is not None else subprocess.DEVNULL,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            pass_fds=(report_w,) if report_w != -1 else (),
        )
    except BaseException:
        if report_r != -1:
            os.close(report_r)
        raise
    finally:
        if errlog is not None:
            errlog.close()
        if report_w != -1:
            os.close(report_w)
    server_pid = None
    if report_r != -1:
        try:
            server_pid = await _spawn_report(report_r, process, command)
        finally:
            os.close(report_r)
    read_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    channel = StdioChannel(read_stream, write_stream, process, server_pid)
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
        """Close stdin, wait, then end the process tree (bounded): through the reaper when
        there is one, else by SIGTERM and SIGKILL to the server's process group."""
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
        if channel.server_pid is not None:
            await self._stop_reaper(channel.server_pid)
        else:
            await self._stop_group()
        channel.closed.set()
        with anyio.move_on_after(SIGNAL_GRACE_S):
            await process.aclose()
        channel.read_stream.close()

    async def _stop_reaper(self, server_pid: int) -> None:
        """SIGTERM to the reaper, which ends the whole tree; SIGKILL to it and to the
        server's group if it has not within ``REAPER_STOP_S``."""
        channel = self.channel
        if channel.exited.is_set():
            return
        _signal(channel.process.pid, signal.SIGTERM)
        with anyio.move_on_after(REAPER_STOP_S):
            await channel.exited.wait()
        if not channel.exited.is_set():
            logger.warning(
                "MCP server %s: its process reaper (pid %d) did not end it in %g s; killing",
                self.name, channel.process.pid, REAPER_STOP_S,
            )  # fmt: skip
            _signal_group(server_pid, signal.SIGKILL)
            _signal(channel.process.pid, signal.SIGKILL)
            with anyio.move_on_after(SIGNAL_GRACE_S):
                await channel.exited.wait()

    async def _stop_group(self) -> None:
        channel = self.channel
        process = channel.process
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if channel.exited.is_set():
                break
            _signal_group(process.pid, sig)
            with anyio.move_on_after(SIGNAL_GRACE_S):
                await channel.exited.wait()
        if not channel.exited.is_set():
            logger.warning("MCP server %s (pid %d) outlived SIGKILL", self.name, process.pid)
        _signal_group(process.pid, signal.SIGKILL)  # whatever the leader left behind


async def _spawn_report(fd: int, process: anyio.abc.Process, command: str) -> int | None:
    """The server's pid, as the reaper reports it; ``OSError`` when it could not be
    spawned (the reaper exits then). ``None`` when the reaper said nothing (it failed
    to start: it is killed, and the error is the reaper's exit)."""
    data = b""
    with anyio.move_on_after(REPORT_S):
        while not data.endswith(b"\n"):
            await anyio.wait_readable(fd)
            chunk = os.read(fd, 64)
            if not chunk:
                break
            data += chunk
    words = data.split()
    if len(words) == 2 and words[0] == b"0" and words[1].isdigit():
        return int(words[1])
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with anyio.move_on_after(SIGNAL_GRACE_S):
        await process.wait()
    await process.aclose()
    if len(words) == 1 and words[0].isdigit():
        code = int(words[0])
        raise OSError(code, os.strerror(code), command)
    raise OSError(f"the process reaper did not start (exit status {process.returncode})")


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group ``pid`` leads (it was started in its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
