"""Reaching a path of the workspace by descriptor, never through a link.

Every directory on the way is opened beneath its parent's descriptor with
``O_NOFOLLOW | O_DIRECTORY``: a component that is a link, a file or missing fails
(:class:`Unreachable`) instead of leading elsewhere, so nothing here reads or writes
outside the root, whatever the workspace holds.
"""

from __future__ import annotations

import contextlib
import os
import stat

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Unreachable(Exception):
    """A parent directory of the path is missing, a link or not a directory."""


class Directories:
    """The workspace's directories opened so far (relative path -> descriptor), beneath
    the root's descriptor. :meth:`close` closes them all; :meth:`forget` those at and
    beneath a path that was removed."""

    def __init__(self, root_fd: int) -> None:
        self._fds: dict[str, int] = {"": root_fd}
        self._root_fd = root_fd

    def directory(self, rel: str) -> int:
        """The descriptor of the directory ``rel`` (``""``: the root)."""
        found = self._fds.get(rel)
        if found is not None:
            return found
        parent, _, name = rel.rpartition("/")
        parent_fd = self.directory(parent)
        try:
            fd = os.open(name, _DIRECTORY, dir_fd=parent_fd)
        except OSError as exc:
            raise Unreachable(rel) from exc
        self._fds[rel] = fd
        return fd

    def parent(self, path: str) -> tuple[int, str]:
        """The descriptor of ``path``'s directory, and ``path``'s last name."""
        parent, _, name = path.rpartition("/")
        return self.directory(parent), name

    def forget(self, rel: str) -> None:
        prefix = rel + "/"
        for key in [k for k in self._fds if k == rel or k.startswith(prefix)]:
            if key:
                with contextlib.suppress(OSError):
                    os.close(self._fds.pop(key))

    def close(self) -> None:
        """Close every descriptor but the root's (its owner closes it)."""
        for key, fd in self._fds.items():
            if key:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fds = {"": self._root_fd}


def lstat_at(dirs: Directories, path: str) -> os.stat_result | None:
    """The entry at ``path`` itself (a link not followed); ``None`` when missing."""
    try:
        fd, name = dirs.parent(path)
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (OSError, Unreachable):
        return None


def read_at(dirs: Directories, path: str, limit: int) -> bytes | None:
    """A regular file's content (at most ``limit`` bytes, else ``None``), or a link's
    target; ``None`` when it is missing, special or unreachable."""
    try:
        dir_fd, name = dirs.parent(path)
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            return os.fsencode(os.readlink(name, dir_fd=dir_fd))
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except (OSError, Unreachable):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, limit + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                return None
        return b"".join(chunks)
    finally:
        os.close(fd)
