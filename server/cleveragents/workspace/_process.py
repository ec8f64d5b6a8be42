"""The end of a command's process group: waiting for its exit, and killing what it left.

:func:`exited` returns at the command's exit itself (by pidfd), whoever still holds its
pipes; :func:`terminate` kills the whole process group and collects the output within
:data:`KILL_GRACE_S`, so no background job of a command outlives it
(``docs/security.md`` §3, §6).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

KILL_GRACE_S = 2.0
"""How long the pipes may stay open after a command ended before its output is cut."""


async def exited(proc: asyncio.subprocess.Process) -> None:
    """Return once the process has exited, whoever still holds its pipes.

    ``Process.wait()`` also waits for stdout and stderr to close, so a background job
    holding them (``sleep 1000 &``) would keep a finished command "running" until its
    timeout. A pidfd becomes readable at the exit itself. Without pidfds (not Linux, an
    old kernel) this falls back to ``wait()``, and such a command runs to its timeout.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return  # already exited and reaped
    except (AttributeError, OSError):
        await proc.wait()
        return
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL to the command's whole group; a group already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def terminate(proc: asyncio.subprocess.Process, tasks: set[asyncio.Future[Any]]) -> None:
    """Kill the command's process group and collect what it wrote, within a grace period.

    Called whenever a command ends (exit, timeout or cancel), so no background job of an
    unconfined command outlives it.

    The group is signalled again once the leader is dead or the grace period is over: a
    defence against a child forked while the first signal was delivered. A process that
    left the group (``setsid``) escapes both when unconfined; under bwrap the PID
    namespace dies with its init.
    """
    kill_group(proc)
    try:
        await asyncio.wait(tasks, timeout=KILL_GRACE_S)
    finally:
        kill_group(proc)
        for task in tasks:
            if not task.done():
                task.cancel()
