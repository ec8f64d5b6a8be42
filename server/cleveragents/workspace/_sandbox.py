"""The one place where a path the model gave becomes a path on disk, and an open file.

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
* A denied subtree of the run's pin (the daemon's state dir, when the root holds it:
  :class:`~cleveragents.workspace._pinned.Denied`) is neither read nor written: a path
  resolving into it is refused, and an open that meets its directory on the way (the
  directory renamed since) fails the same way.

Every refusal is a :class:`~cleveragents.workspace.SandboxViolationError` whose message
names the path as the model gave it and the rule it broke.

**Race (TOCTOU) handling.** ``realpath`` and the later ``open`` are two steps; something
running concurrently (the shell tool, another process) could swap a directory for a
symlink in between. :func:`open_beneath` therefore never opens the resolved path by name:
it walks it from a descriptor of the root (the run's pinned one, see
:mod:`~cleveragents.workspace._pinned`, so the root's own name is not re-resolved either),
one component at a time, with ``O_NOFOLLOW`` and ``dir_fd``, so a symlink that appears
after resolution makes the open fail instead of being followed. The residual risks are a
bind mount appearing inside the root (needs privileges) and a hard link created after the
``st_nlink`` check of a write (the written inode is still the one inside the root; see
``docs/security.md``). Python has no ``openat2(RESOLVE_BENEATH)``, which would close
these too.

This module knows nothing of tools, schemas or profiles.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from cleveragents.tool import CleverAgentsError, JSONValue

from ._errors import SandboxViolationError, WorkspaceToolError, show
from ._pinned import (
    DIRECTORY_FLAGS,
    O_CLOEXEC,
    O_NOFOLLOW,
    O_NONBLOCK,
    Denied,
    denied_beneath,
    real_root,
    root_descriptor,
)

PATH_MAX = 4096
"""Longest path accepted, in bytes (Linux ``PATH_MAX`` including the terminating NUL)."""

NAME_MAX = 255
"""Longest single path component accepted, in bytes."""


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
    for denied in denied_beneath(root_real):
        if is_within(real, denied.real):
            raise denied_error(shown, denied, what)
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


def denied_error(shown: str, denied: Denied, what: str = "path") -> SandboxViolationError:
    return SandboxViolationError(
        f"{what} {shown} is in the daemon's state dir {show(denied.real)}, which the "
        "built-in tools neither read nor write"
    )


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
    denied = denied_beneath(root_real)
    dir_fd = root_descriptor(root_real)
    try:
        if not parts:
            return os.open(".", flags | O_CLOEXEC, mode, dir_fd=dir_fd)
        for part in parts[:-1]:
            next_fd = _open_dir(part, dir_fd, shown, create=create_parents)
            os.close(dir_fd)
            dir_fd = next_fd
            _refuse_denied(dir_fd, denied, shown)
        try:
            fd = os.open(parts[-1], flags | O_NOFOLLOW | O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            _raise_if_symlink(exc, parts[-1], dir_fd, shown)
            raise
        try:
            _refuse_denied(fd, denied, shown)
        except BaseException:
            os.close(fd)
            raise
        return fd
    finally:
        os.close(dir_fd)


def _refuse_denied(fd: int, denied: tuple[Denied, ...], shown: str) -> None:
    """Refuse a directory met on the way that is a denied subtree's top (renamed since
    the path was resolved)."""
    if not denied:
        return
    info = os.fstat(fd)
    for each in denied:
        if each.holds(info):
            raise denied_error(shown, each)


def open_regular(
    root_real: str, real: Path, flags: int, shown: str, *, create_parents: bool = False
) -> tuple[int, os.stat_result]:
    """Open a resolved path with :func:`open_beneath`; check on the descriptor that it is a file.

    Opens with ``O_NONBLOCK`` (a FIFO swapped in cannot hang the caller). A missing path,
    a directory or another open failure is a :class:`WorkspaceToolError`; a device file,
    FIFO, socket or other non-regular file a :class:`SandboxViolationError`, and so is a
    symlink met on the way (from :func:`open_beneath`; a refusal is no ``OSError``, so the
    handlers below let it through). ``FileExistsError`` (from ``O_EXCL``) passes through.
    Returns the descriptor, which the caller must close, and its ``fstat``.
    """
    try:
        fd = open_beneath(
            root_real, real, flags | O_NONBLOCK, shown=shown, create_parents=create_parents
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
    try:
        return os.open(part, DIRECTORY_FLAGS, dir_fd=dir_fd)
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
        return os.open(part, DIRECTORY_FLAGS, dir_fd=dir_fd)
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


def read_confined_head(root: str, user_path: str, max_bytes: int) -> tuple[bytes, int] | None:
    """The first ``max_bytes`` bytes of the file ``user_path`` names inside ``root``, and
    its size, read as the file tools read: resolved and opened beneath the root without
    following a link, a regular file only (a FIFO never blocks). ``None`` when nothing is
    there; a link out of the root, a FIFO, a device or a directory raises the tools' own
    errors (:class:`SandboxViolationError`, :class:`WorkspaceToolError`), naming it."""
    real = resolve_path(root, user_path)
    shown = show(user_path)
    try:
        fd, info = open_regular(real_root(root), real, os.O_RDONLY, shown)
    except WorkspaceToolError:
        if not os.path.lexists(real):
            return None
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read(max_bytes), info.st_size


def read_confined_text(root: str, user_path: str, max_bytes: int) -> str | None:
    """The UTF-8 text of the file ``user_path`` names inside ``root``, read as the file
    tools read: resolved and opened beneath the root without following a link, a regular
    file only (a FIFO swapped in never blocks), at most ``max_bytes``. ``None`` when it
    cannot be shown: missing, refused, too big or not text (for a face's diff view)."""
    try:
        real = resolve_path(root, user_path)
        fd, info = open_regular(real_root(root), real, os.O_RDONLY, user_path)
    except (CleverAgentsError, OSError, ValueError):
        return None
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > max_bytes:
            return None
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
