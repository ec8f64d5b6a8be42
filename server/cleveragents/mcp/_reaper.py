"""The parent of a stdio MCP server on Linux: it ends the server's whole tree with it,
``setsid`` descendants included.

A process group cannot do that: a descendant that calls ``setsid`` (a daemonising
helper, a language server's watcher) leaves the group, and once its own parent exits it
is adopted by ``init`` and outlives the daemon. So the daemon starts each stdio server
behind this small program, run as ``python -I -S _reaper.py DAEMON_PID REPORT_FD --
COMMAND ARGS...`` in its own session. It marks itself a *child subreaper*
(``PR_SET_CHILD_SUBREAPER``): every orphan of the server's tree is re-parented to it,
never to ``init``, so the tree is always exactly its descendants, whatever sessions and
groups they made. Then it spawns the server (its own process group, the exact
environment the daemon passed, read back from ``/proc/self/environ`` because Python's
start-up may add ``LC_CTYPE``), reports ``0`` or the spawn's errno on ``REPORT_FD``, and
waits. It ends the tree when:

* the server exits: every descendant left gets SIGTERM, then SIGKILL after
  ``GRACE_S``; the reaper exits with the server's status (re-raising its signal);
* it receives SIGTERM (the daemon stopping the server) or its parent dies
  (``PR_SET_PDEATHSIG``): SIGTERM to the whole tree, SIGKILL after ``GRACE_S``.

The daemon (``_stdio``) signals only the reaper and SIGKILLs it, and the server's group,
only if it outlives a bound. It holds none of the server's pipes (stdin and stdout are
``/dev/null`` once the server runs), so the daemon sees the server's stdout end exactly
when the server's tree lets go of it. Standard library only: it runs without ``site``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time

GRACE_S = 1.0
"""Between SIGTERM and SIGKILL, for the server's tree."""
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
_WATCHED = {signal.SIGCHLD, *_STOPS}


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _original_environment() -> dict[bytes, bytes]:
    """The environment this process was started with, before Python's start-up changed it."""
    with open("/proc/self/environ", "rb") as file:
        block = file.read()
    env = {}
    for entry in block.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            env[name] = value
    return env


def descendants(root: int) -> list[int]:
    """The live (not zombie) descendants of ``root``, from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                fields = file.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


class Reaper:
    """The server's pid, its status once reaped, and the signalling of its tree."""

    def __init__(self, server: int) -> None:
        self.server = server
        self.status: int | None = None
        self.me = os.getpid()

    def reap(self) -> None:
        """Collect every child that exited (the server, and the orphans adopted)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.server:
                self.status = status

    def signal_tree(self, sig: signal.Signals) -> int:
        """Send ``sig`` to every live descendant; how many there were. The server's group
        first, at once, while its id is surely still the server's (not yet reaped)."""
        if self.status is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.server, sig)
        found = descendants(self.me)
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return len(found)

    def wait(self, until: float | None, *, for_server: bool) -> bool:
        """Wait (reaping) until the server has exited (``for_server``) or the tree is
        empty, or until ``until``; whether that happened."""
        while True:
            self.reap()
            if for_server and self.status is not None:
                return True
            if not for_server and not descendants(self.me):
                return True
            left = None if until is None else until - time.monotonic()
            if left is not None and left <= 0:
                return False
            step = left if for_server else min(0.05, left if left is not None else 0.05)
            info = (
                signal.sigtimedwait(_WATCHED, step)
                if step is not None
                else signal.sigwaitinfo(_WATCHED)
            )
            if info is not None and info.si_signo in _STOPS and for_server:
                return False  # asked to stop: the caller ends the tree

    def end_tree(self, already_terminated: bool) -> None:
        """SIGTERM (unless sent already), up to ``GRACE_S``, then SIGKILL until none is left."""
        if not already_terminated and self.signal_tree(signal.SIGTERM):
            self.wait(time.monotonic() + GRACE_S, for_server=False)
        for _ in range(100):
            if not self.signal_tree(signal.SIGKILL):
                break
            self.wait(time.monotonic() + 0.05, for_server=False)
        self.reap()


def _exit_like(status: int | None) -> None:
    """Exit as the server did: its code, or killed by its signal."""
    if status is None:
        os._exit(1)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
            os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    parent, report = int(argv[1]), int(argv[2])
    command = argv[4:] if argv[3:4] == ["--"] else argv[3:]
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError) as exc:  # a sandbox refusing prctl: the group still ends
        sys.stderr.write(f"[cleveragents] the server's setsid descendants may outlive it: {exc}\n")
    # Blocked before the spawn, so that no exit or stop is missed; the server gets an
    # empty mask and default dispositions (Python ignores SIGPIPE and SIGXFSZ).
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    if os.getppid() != parent:  # the daemon died before the line above
        os._exit(1)
    try:
        server = os.posix_spawnp(
            command[0], command, _original_environment(), setpgroup=0,
            setsigmask=(), setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, *_STOPS),
        )  # fmt: skip
    except OSError as exc:
        os.write(report, b"%d\n" % (exc.errno or 1))
        os._exit(127)
    os.write(report, b"0 %d\n" % server)
    os.close(report)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    reaper = Reaper(server)
    exited = reaper.wait(None, for_server=True)
    if not exited:  # asked to stop: the whole tree, then the server's exit, bounded
        reaper.signal_tree(signal.SIGTERM)
        reaper.wait(time.monotonic() + GRACE_S, for_server=True)
    reaper.end_tree(already_terminated=not exited)
    _exit_like(reaper.status)


if __name__ == "__main__":
    main(sys.argv)
