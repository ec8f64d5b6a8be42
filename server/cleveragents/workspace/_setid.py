"""After a command run as root: take the setuid and setgid bits off what it left.

A command run as root, confined or not, can leave a setuid-root file in the workspace
(``cp /bin/sh x; chmod u+s x``; bubblewrap's mounts are ``nosuid`` only inside the
sandbox): whoever runs it later, outside, is root. So after every command run as root,
:func:`strip_setid` walks the sandbox root from its pinned descriptor and clears
``S_ISUID`` and ``S_ISGID`` on each regular file whose status changed since the command
started (``st_ctime``, which a command cannot set back: ``chmod`` and creation both move
it). Files that had the bits before the command are left alone.

The walk never follows a link (each directory is opened ``O_NOFOLLOW`` beneath its
parent, each file by ``O_PATH | O_NOFOLLOW`` and changed through that descriptor), stays
on the root's file system (a mount inside the root is not entered), and stops after
``MAX_SETID_SCAN_ENTRIES`` entries (about 1 s here) or below ``MAX_DEPTH`` levels; the
sweep then says it was partial.
It costs about 4 µs an entry (20,000 files: about 0.1 s), so it runs only where a left
bit is a privilege escalation: as root. This module knows nothing of the shell tool.
"""

from __future__ import annotations

import contextlib
import os
import stat

import attrs

from ._pinned import DIRECTORY_FLAGS, O_CLOEXEC, O_NOFOLLOW

MAX_SETID_SCAN_ENTRIES = 250_000
"""Entries (files, folders, links) one sweep looks at before it stops."""
CTIME_SLACK_NS = 1_000_000_000
"""How much earlier than the command's start a change still counts as the command's:
file times come from a coarse clock, a tick behind the one read at the start."""
MAX_DEPTH = 256
"""Folders deeper than this are not entered (the sweep is then partial)."""
SETID = stat.S_ISUID | stat.S_ISGID
O_PATH = getattr(os, "O_PATH", 0)


def running_as_root() -> bool:
    """Whether commands run as root here (the daemon's effective uid is 0)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


@attrs.frozen
class SetidSweep:
    """What one sweep did: the files it took the bits off (relative to the root), and
    whether it looked at the whole root."""

    stripped: tuple[str, ...] = ()
    complete: bool = True


def strip_setid(root_fd: int, since_ns: int, limit: int = MAX_SETID_SCAN_ENTRIES) -> SetidSweep:
    """Clear the setuid and setgid bits of the regular files beneath ``root_fd`` whose
    status changed at ``since_ns`` (``time.time_ns()``) or later. Blocking: run it in a
    thread. Depth first, so it holds one descriptor per level (at most ``MAX_DEPTH``)."""
    sweep = _Sweep(os.fstat(root_fd).st_dev, since_ns - CTIME_SLACK_NS, limit)
    frames: list[tuple[int, str, list[str]]] = []
    try:
        first = os.dup(root_fd)
        frames.append((first, "", sweep.scan(first, "")))
        while frames and sweep.seen <= limit:
            fd, prefix, pending = frames[-1]
            if not pending:
                os.close(frames.pop()[0])
                continue
            name = pending.pop()
            child = _subdirectory(fd, name, sweep.device)
            if child is None:
                continue
            if len(frames) >= MAX_DEPTH:
                os.close(child)
                sweep.complete = False
                continue
            where = f"{prefix}{name}/"
            frames.append((child, where, sweep.scan(child, where)))
    finally:
        for fd, _, _ in frames:
            os.close(fd)
    complete = sweep.complete and sweep.seen <= limit
    return SetidSweep(tuple(sweep.stripped), complete=complete)


class _Sweep:
    """One walk's state: the root's device, the cut-off, what it saw and stripped."""

    def __init__(self, device: int, since_ns: int, limit: int) -> None:
        self.device = device
        self.since_ns = since_ns
        self.limit = limit
        self.seen = 0
        self.stripped: list[str] = []
        self.complete = True

    def scan(self, fd: int, prefix: str) -> list[str]:
        """Strip the files of one folder; its subfolders' names, to visit next."""
        folders: list[str] = []
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    self.seen += 1
                    if self.seen > self.limit:
                        break
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.name)
                    elif entry.is_file(follow_symlinks=False) and _strip(fd, entry, self.since_ns):
                        self.stripped.append(prefix + entry.name)
        except OSError:
            pass  # removed or made unreadable meanwhile: nothing more to strip in it
        return folders


def _subdirectory(parent: int, name: str, device: int) -> int | None:
    """``name`` opened beneath ``parent`` when it is a folder on the root's file system."""
    try:
        fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
    except OSError:
        return None  # a link swapped in, or gone
    if os.fstat(fd).st_dev != device:
        os.close(fd)
        return None
    return fd


def _strip(parent: int, entry: os.DirEntry[str], since_ns: int) -> bool:
    """Take the bits off one file if it has them and changed since ``since_ns``."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    if not info.st_mode & SETID or info.st_ctime_ns < since_ns:
        return False
    try:
        fd = os.open(entry.name, O_PATH | O_NOFOLLOW | O_CLOEXEC, dir_fd=parent)
    except OSError:
        return False
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or now.st_ino != info.st_ino:
            return False  # swapped meanwhile: not the file that was looked at
        with contextlib.suppress(OSError):
            # An O_PATH descriptor has no fchmod; its /proc name reaches the same inode.
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(now.st_mode) & ~SETID)
            return True
        return False
    finally:
        os.close(fd)
