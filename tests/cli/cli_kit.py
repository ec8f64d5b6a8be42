"""Helpers of the ``cleveragents run`` tests: when a tool's command is running (a FIFO it
writes to), and which processes a run left behind."""

from __future__ import annotations

import contextlib
import os
import select
import signal
from pathlib import Path

from kit.processes import processes_with, still_running

__all__ = ["BOUND_S", "kill_matching", "processes_with", "read_fifo", "still_running"]

BOUND_S = 20.0
"""Bound on every wait for the command under test."""


def read_fifo(path: Path, timeout: float = BOUND_S) -> bytes:
    """Wait (bounded) until a writer puts a line into the FIFO at ``path``; what it wrote.
    A command under test writes to it to say it is running."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        # A non-blocking reader opened before any writer: wait for data, not for a writer.
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"nothing was written to {path} within {timeout} s"
        return os.read(fd, 100)
    finally:
        os.close(fd)


def kill_matching(marker: str) -> None:
    """SIGKILL every process whose command line contains ``marker`` (a test's cleanup)."""
    for pid in processes_with(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
