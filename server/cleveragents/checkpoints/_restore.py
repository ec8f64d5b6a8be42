"""A restore's plan (what it would change, what stops it) and its application.

The plan compares the workspace as just read (W) with the checkpoint (T), limited to
the paths asked for (and the directories they need). A path stops the restore, unless
forced, when W differs there from the expected checkpoint (E: someone changed it since
the caller last looked). A path is never touched, even forced, when W holds something a
checkpoint cannot capture there (a file over the size cap, an ignored file, a special
file) or when T did not capture it: what a restore overwrote must be restorable.

The application goes by descriptor (:mod:`~cleveragents.checkpoints._files`): removals
deepest first, then directories, files and links parents first. Each file is written to
a new file of a random name beside it and renamed over the old one, which replaces a link
at the name rather than writing through it. Just before it touches an entry it checks
the entry is still as W saw it; one changed since is left alone and reported.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable

import attrs

from ._db import CacheKey, cache_key
from ._files import Directories, Unreachable, lstat_at
from ._model import Note
from ._tree import DIR, FILE, LINK, UNCAPTURED, Change, Node, TreeSource, compare, lookup, same

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@attrs.define
class Plan:
    """``actions``: the changes to make, sorted by path; ``conflicts``: what stops the
    restore unless forced; ``blocked``: what it never touches (also in ``conflicts``,
    so that an unforced restore reports it and changes nothing)."""

    checkpoint_id: str
    actions: list[Change]
    conflicts: list[Note]
    blocked: list[Note]
    implied: set[str]  # directories added to the paths asked for


def _ancestors(path: str) -> Iterable[str]:
    while "/" in path:
        path = path.rpartition("/")[0]
        yield path


def _select(changes: list[Change], paths: Iterable[str]) -> tuple[list[Change], set[str]]:
    """The changes at or beneath ``paths``, and the directory changes they need."""
    wanted = {p.strip("/") for p in paths}
    by_path = {change[0]: change for change in changes}
    chosen: dict[str, Change] = {}
    implied: set[str] = set()
    for change in changes:
        path = change[0]
        if path in wanted or any(a in wanted for a in _ancestors(path)):
            chosen[path] = change
    for path, _, new in list(chosen.values()):
        for ancestor in _ancestors(path):
            above = by_path.get(ancestor)
            if above is None or ancestor in chosen:
                continue
            creates_dir = above[2] is not None and above[2].kind == DIR
            removes_dir = above[1] is not None and above[1].kind == DIR and above[2] is None
            if (new is not None and creates_dir) or (new is None and removes_dir):
                chosen[ancestor] = above
                implied.add(ancestor)
    return [chosen[p] for p in sorted(chosen)], implied


def _is_dir(node: Node | None) -> bool:
    return node is not None and node.kind == DIR


def _describe(w: Node | None, e: Node | None, expected_id: str) -> str:
    if e is None:
        return f"created after checkpoint {expected_id}"
    if w is None:
        return f"deleted after checkpoint {expected_id}"
    return f"changed after checkpoint {expected_id}"


def make_plan(
    source: TreeSource,
    w_root: bytes,
    t_root: bytes,
    *,
    checkpoint_id: str,
    expected: tuple[str, bytes] | None,
    paths: Iterable[str] | None,
    dirs: Directories,
    uncaptured_reasons: dict[str, str],
) -> Plan:
    changes = compare(source, w_root, t_root)
    implied: set[str] = set()
    if paths is not None:
        changes, implied = _select(changes, paths)
    conflicts: list[Note] = []
    blocked: list[Note] = []
    actions: list[Change] = []
    blocked_paths: set[str] = set()
    for path, w, t in changes:
        reason = None
        above = next((a for a in _ancestors(path) if a in blocked_paths), None)
        if above is not None:
            reason = f"beneath {above!r}, which a restore may not touch"
        elif w is not None and w.kind == UNCAPTURED:
            why = uncaptured_reasons.get(path, "not captured")
            reason = f"not captured ({why}): a restore over it could not be undone"
        elif t is not None and t.kind == UNCAPTURED:
            reason = f"not captured in checkpoint {checkpoint_id}: its content is unknown"
        elif w is None and t is not None:
            info = lstat_at(dirs, path)
            if info is not None and not (t.kind == DIR and stat.S_ISDIR(info.st_mode)):
                reason = "in the way and not captured (ignored by .gitignore, or a special file)"
        if reason is not None:
            blocked.append(Note(path, reason))
            blocked_paths.add(path)
            continue
        if expected is not None and path not in implied:
            expected_id, e_root = expected
            e = lookup(source, e_root, path)
            differs = _is_dir(w) != _is_dir(e) if _is_dir(w) or _is_dir(e) else not same(w, e)
            if differs:
                conflicts.append(Note(path, _describe(w, e, expected_id)))
        actions.append((path, w, t))
    return Plan(checkpoint_id, actions, conflicts + blocked, blocked, implied)


def _unchanged(
    dirs: Directories, path: str, w: Node | None, seen: Callable[[str], CacheKey | None]
) -> bool:
    """Whether the entry at ``path`` is still what the read saw."""
    info = lstat_at(dirs, path)
    if info is None or w is None:
        return info is None and w is None
    if w.kind == FILE:
        return stat.S_ISREG(info.st_mode) and cache_key(info) == seen(path)
    if w.kind == LINK:
        return stat.S_ISLNK(info.st_mode)
    return stat.S_ISDIR(info.st_mode)


def _replace(dir_fd: int, name: str, make: Callable[[str], None]) -> None:
    temp = f".{name[:40]}.{secrets.token_hex(6)}.restoring"
    make(temp)
    try:
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


def _write_file(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    def make(temp: str) -> None:
        fd = os.open(temp, _NEW, 0o600, dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)

    _replace(dir_fd, name, make)


def _write_link(dir_fd: int, name: str, target: bytes) -> None:
    _replace(dir_fd, name, lambda temp: os.symlink(target, temp, dir_fd=dir_fd))


def checked_content(content: Callable[[Node], bytes | None], node: Node, path: str) -> bytes:
    data = content(node)
    if data is None or hashlib.sha256(data).digest() != node.digest:
        raise LookupError(f"the store lacks the content of {path!r} (damaged?)")
    return data


def apply(
    plan: Plan,
    dirs: Directories,
    seen: Callable[[str], CacheKey | None],
    content: Callable[[Node], bytes | None],
) -> tuple[list[Change], list[Note]]:
    """Make the plan's changes; the ones made, and notes on those left alone."""
    done: list[Change] = []
    skipped: list[Note] = []
    plan_w = {path: w for path, w, _ in plan.actions}
    failed: set[str] = set()
    cleared: set[str] = set()  # removed to make way for something else

    def skip(path: str, reason: str) -> None:
        skipped.append(Note(path, reason))
        failed.add(path)
        if path in cleared:
            done.append((path, plan_w[path], None))  # removed, and nothing came instead

    # Removals, deepest first: what T lacks, and what changes between a directory and
    # anything else.
    for path, w, t in sorted(plan.actions, key=lambda c: c[0], reverse=True):
        if w is None or (t is not None and _is_dir(w) == _is_dir(t)):
            continue
        if not _unchanged(dirs, path, w, seen):
            skip(path, "changed while the restore ran: left as it is")
            continue
        try:
            dir_fd, name = dirs.parent(path)
            if w.kind == DIR:
                dirs.forget(path)
                os.rmdir(name, dir_fd=dir_fd)
            else:
                os.unlink(name, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                if path not in plan.implied:
                    skip(path, "holds entries no checkpoint captures (ignored or special files)")
                else:
                    failed.add(path)
            else:
                skip(path, f"could not be removed: {exc.strerror}")
            continue
        except Unreachable:
            skip(path, "a parent directory is missing, a link or not a directory")
            continue
        if t is None:
            done.append((path, w, t))
        else:
            cleared.add(path)

    # Creations and updates, parents first.
    for path, w, t in plan.actions:
        if t is None or path in failed or (_is_dir(w) and _is_dir(t)):
            continue
        if any(a in failed for a in _ancestors(path)):
            skip(path, "its directory could not be made ready: left as it is")
            continue
        removed = w is not None and _is_dir(w) != _is_dir(t)
        if not _unchanged(dirs, path, None if removed else w, seen):
            skip(path, "changed while the restore ran: left as it is")
            continue
        try:
            dir_fd, name = dirs.parent(path)
            if t.kind == DIR:
                try:
                    os.mkdir(name, 0o777, dir_fd=dir_fd)
                except FileExistsError:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    if not stat.S_ISDIR(info.st_mode):
                        raise
            elif t.kind == LINK:
                _write_link(dir_fd, name, checked_content(content, t, path))
            else:
                _write_file(dir_fd, name, checked_content(content, t, path), t.mode)
        except OSError as exc:
            skip(path, f"could not be written: {exc.strerror}")
            continue
        except Unreachable:
            skip(path, "a parent directory is missing, a link or not a directory")
            continue
        done.append((path, w, t))
    return sorted(done, key=lambda c: c[0]), skipped
