"""The spawned daemon's stderr: passed on line by line, its tail kept for error messages.

The daemon logs to stderr. The client reads that pipe (so the daemon never blocks on a
full one), hands each line to a callback (by default, this process's stderr) and keeps
the last lines, so a daemon that dies before ``initialize`` completes is reported with
its exit code and what it said: :class:`DaemonStartError`.

Knows nothing of JSON-RPC.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
from collections.abc import Callable

TAIL_LINES = 20
MAX_LINE = 64 * 1024
"""A longer line is passed on and kept in pieces of this size."""

LineCallback = Callable[[str], None]


def to_stderr(line: str) -> None:
    """The default: the daemon's lines go to this process's stderr, as if inherited."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(line)
        sys.stderr.flush()


class DaemonStartError(ConnectionError):
    """The daemon exited (or closed its output) before ``initialize`` completed.

    ``returncode`` is its exit code (``None`` if it had not exited yet) and
    ``stderr_tail`` the last lines it wrote on stderr; both are in the message."""

    def __init__(self, returncode: int | None, stderr_tail: str) -> None:
        status = "closed its output" if returncode is None else f"exited with code {returncode}"
        message = f"the daemon {status} before initialize completed"
        message += f"; its stderr ended with:\n{stderr_tail}" if stderr_tail else " (no stderr)"
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class StderrTail:
    """Reads a stream to its end in a task, forwarding lines and keeping the last ones."""

    def __init__(self, stream: asyncio.StreamReader, on_line: LineCallback | None) -> None:
        self._stream = stream
        self._on_line = on_line
        self._lines: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            try:
                raw = await self._stream.readline()
            except ValueError:  # a line over the stream's limit: take what is buffered
                raw = await self._stream.read(MAX_LINE)
            except (ConnectionError, OSError):
                return
            if not raw:
                return
            line = raw.decode("utf-8", "replace")
            self._lines.append(line)
            if self._on_line is not None:
                self._on_line(line)

    def tail(self) -> str:
        return "".join(self._lines).rstrip("\n")

    async def drained(self, timeout: float) -> None:
        """Wait (bounded) until the stream ended: all the daemon wrote has been read."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.shield(self.task)

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
