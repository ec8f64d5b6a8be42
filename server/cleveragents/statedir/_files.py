"""The state dir pinned by descriptor, its folders, and the files opened beneath them.

:class:`StateDir` opens the directory once and keeps that descriptor (opened again, by
name, only when the directory pinned was removed). :meth:`StateDir.folder` reaches a
subfolder from it one component at a time with ``O_NOFOLLOW | O_DIRECTORY``: a link
planted at ``runs`` or ``acp`` (when the state dir lies inside a sandbox root, a
command can plant one) is refused, never followed. A :class:`Folder` opens its files
by descriptor:

* reads take a regular file only, opened ``O_NOFOLLOW | O_NONBLOCK`` and checked on
  the descriptor: a link, a FIFO, a device, a socket or a folder at the name is
  skipped and logged once, never followed, never waited on; reads and lines are
  bounded by their caller's limit;
* new files are created ``O_EXCL``, 0600; a file replaced goes through a new file of a
  random name and ``rename``, which replaces a link at the name itself, never its
  target;
* folders are created 0700, and a folder a writer opens is tightened to 0700 when it
  belongs to this user and is wider.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import IO

logger = logging.getLogger(__name__)

NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
"""The flags every open beneath the state dir carries."""
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | NO_FOLLOW
_REFUSED = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EMLINK})  # a link where a name was
_SKIP_CHUNK = 1024 * 1024
_WARNED_MAX = 1024
_warned: set[tuple[str, str]] = set()


def warn_once(path: Path | str, why: str) -> None:
    """Log a skipped name once per process (a listing repeats every few seconds)."""
    key = (str(path), why)
    if key in _warned:
        return
    if len(_warned) < _WARNED_MAX:
        _warned.add(key)
    logger.warning("skipped %s in the state dir: %s (never followed nor waited on)", path, why)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


class StateDir:
    """One state dir, pinned by descriptor (see the module docstring).

    Thread-safe; holds one descriptor from its first use until :meth:`close` (or until
    it is collected)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._closer: weakref.finalize[..., StateDir] | None = None
        self._secret: bytes | None = None

    def _pin(self, create: bool) -> int | None:
        """A new descriptor of the pinned directory (the caller closes it); ``None`` when
        it does not exist and ``create`` is false."""
        with self._lock:
            fd = self._fd
            if fd is not None:
                with contextlib.suppress(OSError):
                    if os.fstat(fd).st_nlink > 0:
                        return os.dup(fd)
                self._unpin()  # removed since it was pinned: pinned again below, by name
            if create:
                self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except FileNotFoundError:
                if create:
                    raise
                return None
            self._fd = fd
            self._closer = weakref.finalize(self, os.close, fd)
            return os.dup(fd)

    def _unpin(self) -> None:
        if self._closer is not None:
            self._closer()
        self._fd = self._closer = None

    def close(self) -> None:
        """Close the pinned descriptor (a later use pins the directory again)."""
        with self._lock:
            self._unpin()

    def folder(self, *names: str, create: bool = False) -> Folder | None:
        """The folder ``STATE/names...``, reached from the pin one component at a time
        without following a link; created (0700) with ``create``. ``None`` when it does
        not exist; ``OSError`` when a component is a link or not a folder (logged once),
        or when it cannot be created."""
        fd = self._pin(create)
        if fd is None:
            return None
        path = self.path
        try:
            for name in names:
                path = path / name
                child = _enter(fd, name, path, create)
                os.close(fd)
                fd = -1
                if child is None:
                    return None
                fd = child
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        return Folder(fd, path)

    def read_file(self, *names: str, limit: int) -> bytes | None:
        """The whole regular file ``STATE/names...`` (the last name the file's), or
        ``None`` when a folder or the file is missing, is a link or not a regular file,
        holds more than ``limit`` bytes, or cannot be read: for state a reader does
        without (tokens, approvals), where each of these means "nothing kept"."""
        *folders, name = names
        try:
            folder = self.folder(*folders)
            if folder is None:
                return None
            with folder:
                return folder.read_bytes(name, limit)
        except OSError:
            return None

    def key(self, purpose: str) -> bytes | None:
        """A secret of this state dir for ``purpose`` (an HMAC key), derived from
        ``STATE/secret.key``; ``None`` when that cannot be read nor made (no state dir
        yet, a read-only one). See :mod:`~cleveragents.statedir._secret`."""
        from ._secret import derive, load_secret

        with self._lock:
            secret = self._secret
        if secret is None:
            secret = load_secret(self)
            if secret is None:
                return None
            with self._lock:
                self._secret = secret
        return derive(secret, purpose)


def _enter(parent: int, name: str, path: Path, create: bool) -> int | None:
    """Open the subfolder ``name`` of ``parent`` without following a link."""
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            return None
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=parent)
        try:
            fd = os.open(name, _DIRECTORY, dir_fd=parent)
        except OSError as exc:
            raise _refusal(exc, path) from None
    except OSError as exc:
        raise _refusal(exc, path) from None
    if create:
        _tighten(fd)
    return fd


def _refusal(exc: OSError, path: Path) -> OSError:
    if exc.errno in _REFUSED:
        warn_once(path, "a symbolic link or not a folder")
        return OSError(exc.errno, f"{path} is a symbolic link or not a folder; not followed")
    return exc


def _tighten(fd: int) -> None:
    """A folder of ours readable by others (made by an older version) becomes 0700."""
    with contextlib.suppress(OSError):
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and info.st_mode & 0o077:
            os.fchmod(fd, 0o700)


class Folder:
    """An open folder of the state dir; its files are opened beneath its descriptor.
    A context manager: leaving it closes the descriptor."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def open_read(self, name: str) -> int | None:
        """A descriptor of the regular file ``name`` for reading; ``None`` when it is
        missing, or (logged once) a link or anything but a regular file."""
        return self._open_regular(name, os.O_RDONLY, missing_ok=True)

    def open_append(self, name: str) -> int | None:
        """A descriptor of ``name`` for appending, created 0600 if missing; ``None``
        (logged once) when it is a link or anything but a regular file."""
        return self._open_regular(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, missing_ok=False)

    def _open_regular(self, name: str, flags: int, *, missing_ok: bool) -> int | None:
        # O_NONBLOCK: a FIFO opens at once (and is refused below); a regular file's reads
        # and writes ignore it.
        try:
            fd = os.open(name, flags | NO_FOLLOW | os.O_NONBLOCK, 0o600, dir_fd=self.fd)
        except FileNotFoundError:
            if missing_ok:
                return None
            raise
        except OSError:
            # A link (ELOOP), a FIFO with no reader (ENXIO), a folder (EISDIR)...: skipped
            # when the name is anything but a regular file, raised when it is one.
            info = self.lstat(name)
            if info is None or stat.S_ISREG(info.st_mode):
                raise
            warn_once(self.path / name, _kind(info.st_mode))
            return None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                warn_once(self.path / name, _kind(mode))
                os.close(fd)
                return None
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        return fd

    def create(self, name: str, flags: int = os.O_WRONLY) -> int:
        """Create the new file ``name`` (0600); ``FileExistsError`` when the name is
        taken, by anything, a link included."""
        return os.open(name, flags | os.O_CREAT | os.O_EXCL | NO_FOLLOW, 0o600, dir_fd=self.fd)

    def replace(self, name: str, data: bytes) -> None:
        """Replace ``name`` atomically with ``data`` (a crash leaves the old or the new)
        through a new file of a random name: a link at ``name`` is replaced, never
        written through."""
        temp = f".{name}.{uuid.uuid4().hex}.tmp"
        fd = self.create(temp)
        try:
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=self.fd)
            raise

    def read_bytes(self, name: str, limit: int) -> bytes | None:
        """The whole regular file ``name`` if it holds at most ``limit`` bytes; ``None``
        when it is missing, not a regular file, or larger (logged once)."""
        fd = self.open_read(name)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            warn_once(self.path / name, f"larger than {limit} bytes")
            return None
        return data

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry ``name`` itself (a link is not followed); ``None`` when missing."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return None

    def entries(self) -> list[os.DirEntry[str]]:
        """The folder's entries (``scandir`` on the descriptor: names, types, inodes)."""
        with os.scandir(self.fd) as scan:
            return list(scan)

    def link(self, source: str, name: str) -> None:
        """Hard-link ``source`` (a file of this folder) as ``name``: exclusive, like
        ``O_EXCL`` (``FileExistsError`` when the name is taken)."""
        os.link(source, name, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_lines(handle: IO[bytes], max_line: int) -> Iterator[bytes | None]:
    """The lines of ``handle``, each at most ``max_line`` bytes before its newline; a
    longer one is skipped as it is read (memory stays bounded) and yields ``None``."""
    while True:
        raw = handle.readline(max_line + 1)
        if not raw:
            return
        if len(raw) > max_line and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = handle.readline(_SKIP_CHUNK)
            yield None
            continue
        yield raw
