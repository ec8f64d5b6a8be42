"""Which processes a test left behind: by a marker in their command line, and whether
they exit within a bound (waited for by pidfd, no polling)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
from pathlib import Path


def processes_with(marker: str) -> list[int]:
    """Pids whose command line contains ``marker`` (zombies included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


def still_running(pids: list[int], timeout: float = 5.0) -> list[int]:
    """Wait (bounded, by pidfd) for each pid to exit; those still running after it."""
    alive = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                alive.append(pid)
        finally:
            os.close(fd)
    return alive


def kill_all(pids: list[int]) -> None:
    """SIGKILL what a failed test left behind (a pid already gone is no error)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
