"""The one place where a path the model gave becomes a path on disk.

Every file tool goes through :func:`resolve_path` (and :func:`check_pattern` for glob
patterns), then opens what it resolved with :func:`open_beneath` (files through
:func:`open_regular`). The rules:

* A relative path is relative to the sandbox root; an absolute path must lie inside it
  (the root as given, or its real path).
* The path is resolved after following symlinks (``realpath``); the result must be the
  root or lie beneath it. ``..`` escapes, absolute paths elsewhere, symlinks pointing
  outside (chains included) and the ``/tmp/ws`` vs ``/tmp/ws-evil`` prefix trick are
  refused.
* NUL bytes, paths over ``PATH_MAX`` and components over ``NAME_MAX`` are refused with a
  clear message rather than an ``OSError``.
* Device files, FIFOs and sockets are refused.
* For writes, a regular file with more than one hard link is refused: it may be the same
  inode as a file outside the root.
* Percent-encoding and ``~`` are not interpreted: ``%2e%2e`` is a file name.

Every refusal is a :class:`SandboxViolationError` whose message names the path as the
model gave it and the rule it broke.

**Race (TOCTOU) handling.** ``realpath`` and the later ``open`` are two steps; something
running concurrently (the shell tool, another process) could swap a directory for a
symlink in between. :func:`open_beneath` therefore never opens the resolved path by name:
it walks it from a descriptor of the root (the run's pinned one, see :class:`PinnedRoot`,
so the root's own name is not re-resolved either), one component at a time, with ``O_NOFOLLOW``
and ``dir_fd``, so a symlink that appears after resolution makes the open fail instead of
being followed. The residual risks are a bind mount appearing inside the root (needs
privileges) and a hard link created after the ``st_nlink`` check of a write (the written
inode is still the one inside the root; see ``docs/security.md``). Python has no
``openat2(RESOLVE_BENEATH)``, which would close these too.

This module knows nothing of tools, schemas or profiles.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs

from cleveragents.tool._errors import ToolError
from cleveragents.tool._types import JSONValue

from ._errors import SandboxViolationError

PATH_MAX = 4096
"""Longest path accepted, in bytes (Linux ``PATH_MAX`` including the terminating NUL)."""

NAME_MAX = 255
"""Longest single path component accepted, in bytes."""

_SHOW_MAX = 120

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class WorkspaceToolError(ToolError):
    """A file or shell tool failed for a reason other than the sandbox.

    A missing file, a binary file, an ambiguous edit, an invalid regex, a timed-out
    command. The runner records the message as the call's error.
    """


def show(text: str) -> str:
    """Quote a path or pattern for an error message, as the model gave it.

    Control characters (NUL included) are escaped; very long values are abbreviated.
    """
    if len(text) > _SHOW_MAX:
        return f"{text[:100]!r}... ({len(text)} characters)"
    return repr(text)


def sandbox_root(inputs: dict[str, JSONValue]) -> str:
    """The real path of the run's sandbox root, taken from a handler's inputs."""
    root = inputs.get("sandbox_root")
    if not isinstance(root, str) or not root:
        raise SandboxViolationError(
            "no sandbox root: built-in workspace tools need the run's sandbox_root"
        )
    return real_root(root)


def given_root(inputs: dict[str, JSONValue]) -> str:
    """The sandbox root as the context gave it (perhaps through a symlink), so that
    :func:`resolve_path` accepts absolute paths under either spelling of it."""
    sandbox_root(inputs)  # the same checks
    return os.path.normpath(str(inputs["sandbox_root"]))


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
    _descriptor: _RootDescriptor = attrs.field(factory=_RootDescriptor, eq=False, repr=False)

    @classmethod
    def open(cls, root: str) -> PinnedRoot:
        real = real_root(root)
        info = os.stat(real)
        return cls(os.path.normpath(root), real, info.st_dev, info.st_ino)

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


def _open_same_directory(real: str, device: int, inode: int) -> int | None:
    try:
        fd = os.open(real, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
    except OSError:
        return None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != (device, inode):
        os.close(fd)
        return None
    return fd


def root_descriptor(root_real: str) -> int:
    """A descriptor of the real root ``root_real``, which the caller must close.

    The pinned one when a pin for that root is active (see :class:`PinnedRoot`);
    otherwise the directory opened now, by name."""
    pinned = _PINNED.get()
    if pinned is not None and root_real == pinned.real:
        return pinned.descriptor()
    return os.open(root_real, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)


def open_directory_at(name: str, dir_fd: int) -> int:
    """Open the subdirectory ``name`` of the open directory ``dir_fd``, never following a
    symlink: a name swapped for a symlink (or a file) since it was listed fails with
    ``ELOOP`` or ``ENOTDIR`` instead of leading elsewhere. The caller closes the result."""
    return os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=dir_fd)


def open_regular_at(name: str, dir_fd: int) -> int | None:
    """Open the regular file ``name`` of the open directory ``dir_fd`` for reading.

    Never follows a symlink and never blocks on a FIFO; anything but a regular file (on
    the descriptor's ``fstat``) gives ``None``. ``OSError`` (missing, unreadable) passes
    through. The caller closes the result."""
    flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
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


_PINNED: contextvars.ContextVar[PinnedRoot | None] = contextvars.ContextVar(
    "cleveragents_pinned_root", default=None
)


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


def is_within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or beneath it (both normalised, absolute)."""
    if root == os.sep:
        return path.startswith(os.sep)
    return path == root or path.startswith(root + os.sep)


def relative_to_root(root_real: str, path: str | Path) -> str:
    """``path`` relative to the root, with ``/`` separators; the root itself is ``.``."""
    return Path(os.path.relpath(path, root_real)).as_posix()


def _check_text(user_path: object, what: str) -> str:
    if not isinstance(user_path, str):
        raise SandboxViolationError(f"{what} must be a string, not {type(user_path).__name__}")
    if user_path == "":
        raise SandboxViolationError(f"{what} '' is empty")
    shown = show(user_path)
    if "\x00" in user_path:
        raise SandboxViolationError(f"{what} {shown} contains a NUL byte")
    try:
        encoded = os.fsencode(user_path)
    except UnicodeEncodeError:
        raise SandboxViolationError(f"{what} {shown} is not a valid file name") from None
    if len(encoded) >= PATH_MAX:
        raise SandboxViolationError(
            f"{what} {shown} is too long ({len(encoded)} bytes; the limit is {PATH_MAX - 1})"
        )
    if any(len(part) > NAME_MAX for part in encoded.split(b"/")):
        raise SandboxViolationError(f"{what} {shown} has a component longer than {NAME_MAX} bytes")
    return shown


def resolve_path(root: str, user_path: str, *, for_write: bool = False, what: str = "path") -> Path:
    """Resolve ``user_path`` inside ``root``, following symlinks, or refuse it.

    Returns the real (symlink-free) absolute path, which may not exist yet. Raises
    :class:`SandboxViolationError` naming ``user_path`` as given and the rule broken.
    With ``for_write``, an existing regular file with more than one hard link is refused.
    Callers open the result with :func:`open_beneath`, never by name.
    """
    shown = _check_text(user_path, what)
    root_real = real_root(root)
    root_abs = os.path.normpath(root)
    if os.path.isabs(user_path):
        candidate = user_path
        lexical = os.path.normpath(user_path)
        if not (is_within(lexical, root_real) or is_within(lexical, root_abs)):
            raise SandboxViolationError(
                f"{what} {shown} is an absolute path outside the sandbox root"
            )
    else:
        candidate = os.path.join(root_real, user_path)
        if not is_within(os.path.normpath(candidate), root_real):
            raise SandboxViolationError(f"{what} {shown} escapes the sandbox root")
    real = os.path.realpath(candidate)
    if not is_within(real, root_real):
        raise SandboxViolationError(
            f"{what} {shown} is or passes through a symlink pointing outside the sandbox root"
        )
    try:
        info = os.stat(real)
    except FileNotFoundError:
        return Path(real)
    except NotADirectoryError:
        return Path(real)  # a file used as a directory: the caller reports "not found"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SandboxViolationError(f"{what} {shown} is a symlink loop") from None
        if exc.errno == errno.ENAMETOOLONG:
            raise SandboxViolationError(f"{what} {shown} resolves to a path too long") from None
        raise WorkspaceToolError(f"cannot access {what} {shown}: {exc.strerror}") from None
    check_file_type(info, shown, what)
    if for_write and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise SandboxViolationError(hard_link_message(shown, info.st_nlink, what))
    return Path(real)


def hard_link_message(shown: str, nlink: int, what: str = "path") -> str:
    return (
        f"{what} {shown} is a file with {nlink} hard links; it may be the same file as one "
        "outside the sandbox root, so it is not modified"
    )


def check_file_type(info: os.stat_result, shown: str, what: str = "path") -> None:
    """Refuse device files, FIFOs and sockets (anything not a file, directory or link)."""
    mode = info.st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise SandboxViolationError(f"{what} {shown} is a device file")
    if stat.S_ISFIFO(mode):
        raise SandboxViolationError(f"{what} {shown} is a FIFO")
    if stat.S_ISSOCK(mode):
        raise SandboxViolationError(f"{what} {shown} is a socket")


def open_beneath(
    root_real: str,
    real: str | Path,
    flags: int,
    *,
    shown: str,
    mode: int = 0o666,
    create_parents: bool = False,
) -> int:
    """Open ``real`` (a result of :func:`resolve_path`) without following any symlink.

    Walks from a descriptor of the root, one component at a time, with ``O_NOFOLLOW``;
    with ``create_parents``, missing directories are created on the way (``mkdirat`` does
    not follow symlinks either). A symlink met on the way means the tree changed after
    resolution: that is a :class:`SandboxViolationError`. Returns a descriptor the
    caller must close.
    """
    rel = os.path.relpath(real, root_real)
    parts = [] if rel == os.curdir else rel.split(os.sep)
    if os.pardir in parts:  # resolve_path never returns such a path
        raise SandboxViolationError(f"path {shown} escapes the sandbox root")
    dir_fd = root_descriptor(root_real)
    try:
        if not parts:
            return os.open(".", flags | _O_CLOEXEC, mode, dir_fd=dir_fd)
        for part in parts[:-1]:
            next_fd = _open_dir(part, dir_fd, shown, create=create_parents)
            os.close(dir_fd)
            dir_fd = next_fd
        try:
            return os.open(parts[-1], flags | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            _raise_if_symlink(exc, parts[-1], dir_fd, shown)
            raise
    finally:
        os.close(dir_fd)


def open_regular(
    root_real: str, real: Path, flags: int, shown: str, *, create_parents: bool = False
) -> tuple[int, os.stat_result]:
    """Open a resolved path with :func:`open_beneath`; check on the descriptor that it is a file.

    Opens with ``O_NONBLOCK`` (a FIFO swapped in cannot hang the caller). A missing path,
    a directory or another open failure is a :class:`WorkspaceToolError`; a device file,
    FIFO, socket or other non-regular file a :class:`SandboxViolationError`.
    ``FileExistsError`` (from ``O_EXCL``) passes through. Returns the descriptor, which
    the caller must close, and its ``fstat``.
    """
    try:
        fd = open_beneath(
            root_real, real, flags | _O_NONBLOCK, shown=shown, create_parents=create_parents
        )
    except FileExistsError:
        raise
    except FileNotFoundError:
        raise WorkspaceToolError(f"path {shown} does not exist") from None
    except NotADirectoryError:
        raise WorkspaceToolError(f"path {shown} does not exist (a parent is a file)") from None
    except IsADirectoryError:
        raise WorkspaceToolError(f"path {shown} is a directory") from None
    except OSError as exc:
        raise WorkspaceToolError(f"cannot open path {shown}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        check_file_type(info, shown)
        if stat.S_ISDIR(info.st_mode):
            raise WorkspaceToolError(f"path {shown} is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise SandboxViolationError(f"path {shown} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _open_dir(part: str, dir_fd: int, shown: str, *, create: bool) -> int:
    flags = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
    try:
        return os.open(part, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        _raise_if_symlink(exc, part, dir_fd, shown)
        raise
    # Created concurrently? The open below still refuses a symlink.
    with contextlib.suppress(FileExistsError):
        os.mkdir(part, 0o777, dir_fd=dir_fd)
    try:
        return os.open(part, flags, dir_fd=dir_fd)
    except OSError as exc:
        _raise_if_symlink(exc, part, dir_fd, shown)
        raise


def _raise_if_symlink(exc: OSError, part: str, dir_fd: int, shown: str) -> None:
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return
    try:
        is_link = stat.S_ISLNK(os.lstat(part, dir_fd=dir_fd).st_mode)
    except OSError:
        return
    if is_link:
        raise SandboxViolationError(
            f"path {shown} changed while being opened: a symlink appeared on it; not followed"
        ) from None


def check_pattern(root: str, pattern: str, *, what: str = "pattern") -> str:
    """Check a glob pattern and return it relative to the search base.

    Patterns are matched only against entries found by walking beneath the base, so they
    cannot select anything outside; still, a pattern that tries (a ``..`` segment, an
    absolute path outside the root) is refused rather than silently filtered. An absolute
    pattern inside the root is made relative to the root.
    """
    shown = _check_text(pattern, what)
    if os.path.isabs(pattern):
        root_real = real_root(root)
        for prefix in (root_real, os.path.normpath(root)):
            if is_within(os.path.normpath(pattern), prefix):
                pattern = os.path.relpath(pattern, prefix)
                break
        else:
            raise SandboxViolationError(
                f"{what} {shown} is an absolute path outside the sandbox root"
            )
    if os.pardir in pattern.split("/"):
        raise SandboxViolationError(
            f"{what} {shown} contains '..', which would reach outside the sandbox root"
        )
    return pattern
