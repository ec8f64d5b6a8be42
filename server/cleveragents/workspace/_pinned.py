"""The run's pinned sandbox root, and the opens made by descriptor beneath it.

* :class:`PinnedRoot`: the root as it was at ``run/start`` (real path, inode and, while
  active, an open descriptor). :func:`real_root` checks a root against the active pin and
  :func:`root_descriptor` hands out copies of its descriptor.
* :func:`open_directory_at` and :func:`open_regular_at`: open one name beneath an open
  directory, never following a symlink, never blocking on a FIFO.
* :class:`Denied`: a subtree beneath the root that no built-in tool may read or write
  (the daemon's state dir, when the root holds it); :func:`denied_beneath` gives the
  active pin's.

Everything the tools open is reached from the pinned descriptor, never through a new
resolution of the root's name, so a root swapped mid-run cannot move a call out of the
pinned directory (``docs/security.md`` §2.3). This module knows nothing of the model's
paths (see :mod:`~cleveragents.workspace._sandbox`) nor of the tools.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
import threading
from collections.abc import Iterable, Iterator

import attrs

from ._errors import SandboxViolationError, show

O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
DIRECTORY_FLAGS = os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
"""Open a directory, and refuse a symlink (or a file) in its place."""


class _RootDescriptor:
    """The pinned root's directory descriptor, shared by a run's tool calls.

    Callers never use it directly: :meth:`dup` hands each one its own copy under the
    lock, so closing the pin (the run ended) cannot pull a descriptor out from under a
    call still running in a thread, nor let a reused descriptor number point elsewhere.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None

    def set(self, fd: int | None) -> None:
        with self._lock:
            old, self._fd = self._fd, fd
        if old is not None:
            os.close(old)

    def dup(self) -> int | None:
        with self._lock:
            return None if self._fd is None else os.dup(self._fd)


@attrs.frozen
class Denied:
    """A subtree beneath a pinned root that the built-in tools neither read nor write:
    its real path, and the identity of its directory when it existed at the pin (so a
    rename of it is still recognised by an open walking the tree)."""

    real: str
    device: int = -1
    inode: int = -1

    @classmethod
    def of(cls, path: str) -> Denied:
        real = os.path.realpath(path)
        try:
            info = os.stat(real)
        except OSError:
            return cls(real)
        return cls(real, info.st_dev, info.st_ino)

    def holds(self, info: os.stat_result) -> bool:
        """Whether ``info`` (of a directory opened on the way) is this subtree's top."""
        return (info.st_dev, info.st_ino) == (self.device, self.inode)


@attrs.frozen
class PinnedRoot:
    """A run's sandbox root as it was at ``run/start``: its real path, its inode and,
    while active, an open descriptor of it.

    While a pin is active (:meth:`activate`, around the whole run), every tool call
    checks that the root's name still leads to that same directory, and then opens what
    it uses beneath the pinned descriptor, never through a new resolution of the name;
    the shell binds that descriptor. So a root swapped for a symlink mid-run (by another
    run, or a shell) fails every later call of the run with a sandbox violation naming
    the root, and a swap that lands between the check and the open still cannot move the
    call out of the pinned directory."""

    given: str
    real: str
    device: int
    inode: int
    denied: tuple[Denied, ...] = ()
    """Subtrees beneath the root no built-in tool may read or write."""
    _descriptor: _RootDescriptor = attrs.field(factory=_RootDescriptor, eq=False, repr=False)

    @classmethod
    def open(cls, root: str, denied: Iterable[str] = ()) -> PinnedRoot:
        """Pin ``root``; those of ``denied`` (the daemon's state dir) that lie beneath it,
        or are it, become subtrees the built-in tools refuse."""
        real = real_root(root)
        info = os.stat(real)
        inside = tuple(
            Denied.of(path) for path in denied
            if _within(os.path.realpath(path), real)
        )  # fmt: skip
        return cls(os.path.normpath(root), real, info.st_dev, info.st_ino, inside)

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Pin the root for the calls made inside: open its descriptor, and close it after.

        If the directory at the real path is no longer the one pinned, no descriptor is
        opened and every call fails with a sandbox violation."""
        self._descriptor.set(_open_same_directory(self.real, self.device, self.inode))
        token = _PINNED.set(self)
        try:
            yield
        finally:
            _PINNED.reset(token)
            self._descriptor.set(None)

    def check(self) -> str:
        """The pinned real path, if the root is still the directory pinned."""
        try:
            moved = os.path.realpath(self.given) != self.real
            info = os.stat(self.real, follow_symlinks=False)
            moved = moved or (info.st_dev, info.st_ino) != (self.device, self.inode)
            moved = moved or not stat.S_ISDIR(info.st_mode)
        except OSError:
            moved = True
        if moved:
            raise self._moved()
        return self.real

    def descriptor(self) -> int:
        """A new descriptor of the pinned directory, which the caller must close."""
        fd = self._descriptor.dup()
        if fd is None:
            raise self._moved()
        return fd

    def _moved(self) -> SandboxViolationError:
        return SandboxViolationError(
            f"sandbox root {show(self.given)} was moved or replaced during the run; "
            "no tool of this run may use it any more"
        )


_PINNED: contextvars.ContextVar[PinnedRoot | None] = contextvars.ContextVar(
    "cleveragents_pinned_root", default=None
)


def _open_same_directory(real: str, device: int, inode: int) -> int | None:
    try:
        fd = os.open(real, DIRECTORY_FLAGS)
    except OSError:
        return None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != (device, inode):
        os.close(fd)
        return None
    return fd


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def denied_beneath(root_real: str) -> tuple[Denied, ...]:
    """The subtrees no built-in tool may touch beneath ``root_real``: the active pin's,
    when it pinned that root (none outside a run)."""
    pinned = _PINNED.get()
    if pinned is not None and root_real == pinned.real:
        return pinned.denied
    return ()


def real_root(root: str) -> str:
    """Check that ``root`` is an absolute existing directory and return its real path
    (the pinned one, checked, when the run pinned this root)."""
    if not os.path.isabs(root) or "\x00" in root:
        raise SandboxViolationError(f"sandbox root {show(root)} is not an absolute path")
    pinned = _PINNED.get()
    if pinned is not None and os.path.normpath(root) in (pinned.given, pinned.real):
        return pinned.check()
    real = os.path.realpath(root)
    if not os.path.isdir(real):
        raise SandboxViolationError(f"sandbox root {show(root)} is not an existing directory")
    return real


def root_descriptor(root_real: str) -> int:
    """A descriptor of the real root ``root_real``, which the caller must close.

    The pinned one when a pin for that root is active (see :class:`PinnedRoot`);
    otherwise the directory opened now, by name."""
    pinned = _PINNED.get()
    if pinned is not None and root_real == pinned.real:
        return pinned.descriptor()
    return os.open(root_real, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)


def open_directory_at(name: str, dir_fd: int) -> int:
    """Open the subdirectory ``name`` of the open directory ``dir_fd``, never following a
    symlink: a name swapped for a symlink (or a file) since it was listed fails with
    ``ELOOP`` or ``ENOTDIR`` instead of leading elsewhere. The caller closes the result."""
    return os.open(name, DIRECTORY_FLAGS, dir_fd=dir_fd)


def open_regular_at(name: str, dir_fd: int) -> int | None:
    """Open the regular file ``name`` of the open directory ``dir_fd`` for reading.

    Never follows a symlink and never blocks on a FIFO; anything but a regular file (on
    the descriptor's ``fstat``) gives ``None``. ``OSError`` (missing, unreadable) passes
    through. The caller closes the result."""
    flags = os.O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
    fd = os.open(name, flags, dir_fd=dir_fd)
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        return None
    return fd
