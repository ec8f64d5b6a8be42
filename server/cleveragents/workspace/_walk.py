"""The directory walk behind ``file-list`` and ``file-search``.

:class:`Walk` is a sorted, depth-first walk beneath a base directory that never follows
symlinks, skips ``.git`` and the entries its :class:`~cleveragents.workspace._globs.GitIgnore`
ignores, and stops after a number of entries or levels, or when its stop callback raises.

The walk goes by directory descriptors, never by name: it starts from the root's
descriptor (the run's pinned one, see :func:`~cleveragents.workspace._pinned.root_descriptor`),
opens each directory beneath its parent's descriptor with ``O_NOFOLLOW`` and lists it
through that descriptor. A directory swapped for a symlink after its parent was listed
then fails to open (``ELOOP``/``ENOTDIR``) and is skipped, never followed; and a swap of
the root's own name cannot move the walk. It is iterative (an explicit stack, so no
recursion limit) and holds at most one descriptor per level, under the depth cap.
``.gitignore`` files are opened beneath the same descriptors. A denied subtree of the
run's pin (the daemon's state dir) is neither listed nor entered.

It does not know the tools, their arguments, outputs or limits, nor how a path the model
gave is checked: callers pass already resolved real paths (see
:mod:`~cleveragents.workspace._sandbox`), and decide what to report of each
:class:`Entry` (files are opened afresh with ``open_beneath``).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator

import attrs

from ._errors import name_some, show
from ._globs import GitIgnore
from ._pinned import denied_beneath, open_directory_at, root_descriptor
from ._sandbox import relative_to_root

DEFAULT_MAX_DEPTH = 256
"""Levels beneath its base a :class:`Walk` enters by default. Real trees are a few dozen
deep; a hostile one (1,500 levels from one ``file-write``) must still answer, and the
walk holds one open descriptor per level."""

_ENTRIES_PER_CHECK = 1024  # directory entries read between two calls of the stop callback
_SWAPPED = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EMLINK})  # O_NOFOLLOW met a non-dir


@attrs.define(slots=True)
class Entry:
    """One entry met by a :class:`Walk`.

    ``real`` is its absolute path beneath the real root (its parents are symlink-free;
    the entry itself may be a symlink, which is not resolved). ``rel_root`` (relative to
    the root, what ``.gitignore`` rules see) and ``rel_base`` (relative to the walk's
    base, what a :class:`Glob` sees) use ``/`` separators.
    """

    rel_root: str
    rel_base: str
    real: str
    is_dir: bool


def _no_stop() -> None:
    return None


@attrs.define(slots=True)
class _Frame:
    """One directory on the walk's stack: its descriptor and its sorted entries.

    ``fd`` is closed (set to ``None``) as soon as no subdirectory is left to open, so a
    chain of single directories holds two descriptors, not one per level. ``entries``
    pairs each name with whether it is a directory (``None``: it could not be told).
    """

    fd: int | None
    real: str
    rel_base: str  # "" or ending with "/"
    rel_root: str  # "" or ending with "/"
    depth: int  # of its entries: 1 for the base's children
    entries: list[tuple[str, bool | None]]
    last_dir: int  # index of the last subdirectory in entries, -1 if none
    index: int = 0

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@attrs.define(slots=True)
class Walk:
    """A sorted, depth-first walk beneath ``base_real`` that never follows symlinks.

    ``root_real`` and ``base_real`` are real paths, the base inside the root. Entries
    deeper than ``max_depth`` (1: the base's children; the glob's own bound) are not
    visited, and directories ``depth_cap`` levels down are not entered
    (``depth_capped``). After ``max_entries`` directory entries the walk stops and sets
    ``exhausted``; a directory is read no further than that budget, so a huge one costs
    no more than the budget either. ``stop`` is called before every entry, ignored ones
    included, and every 1024 entries read: it raises to end the walk (a timeout, a
    cancel). A directory that stops being one between its listing and its opening is
    skipped and named in ``changed``. Every descriptor is closed when the iteration
    ends, however it ends.
    """

    root_real: str
    base_real: str
    max_entries: int
    max_depth: int | None = None
    depth_cap: int = DEFAULT_MAX_DEPTH
    stop: Callable[[], None] = _no_stop
    ignore: GitIgnore = attrs.field(factory=GitIgnore)
    visited: int = 0
    exhausted: bool = False
    depth_capped: bool = False
    changed: list[str] = attrs.field(factory=list)

    def __iter__(self) -> Iterator[Entry]:
        stack: list[_Frame] = []
        denied = {each.real for each in denied_beneath(self.root_real)}  # the state dir
        try:
            base = self._open_base()
            if base is None:
                return
            fd, rel_root = base
            self._push(stack, fd, self.base_real, "", rel_root, 1)
            while stack:
                frame = stack[-1]
                if frame.index >= len(frame.entries):
                    stack.pop().close()
                    continue
                index = frame.index
                frame.index += 1
                name, is_dir = frame.entries[index]
                self.stop()
                self.visited += 1
                if self.visited > self.max_entries:
                    self.exhausted = True
                    return
                if name == ".git" or is_dir is None:
                    continue
                rel_root = frame.rel_root + name
                if self.ignore.ignored(rel_root, is_dir):
                    continue
                real = os.path.join(frame.real, name)
                if is_dir and real in denied:
                    continue  # neither listed nor searched, nor entered
                yield Entry(rel_root, frame.rel_base + name, real, is_dir)
                if not is_dir or not (self.max_depth is None or frame.depth < self.max_depth):
                    continue
                if frame.depth >= self.depth_cap:
                    self.depth_capped = True
                    continue
                child = self._enter(frame.fd, name, rel_root)
                if index >= frame.last_dir:
                    frame.close()  # no subdirectory left to open beneath it
                if child is not None:
                    rel_base = frame.rel_base + name + "/"
                    self._push(stack, child, real, rel_base, rel_root + "/", frame.depth + 1)
        finally:
            for frame in stack:
                frame.close()

    def _open_base(self) -> tuple[int, str] | None:
        """The base's descriptor, opened from the root's one level at a time (reading the
        ``.gitignore`` of each level on the way, which apply beneath it too), and the
        base relative to the root (``""`` or ending with ``/``)."""
        rel = relative_to_root(self.root_real, self.base_real)
        parts = [] if rel == "." else rel.split("/")
        try:
            fd = root_descriptor(self.root_real)
        except OSError:
            return None  # the root vanished or is unreadable: nothing to walk
        rel_root = ""
        for part in parts:
            try:
                self.ignore.load_at(fd, rel_root.rstrip("/"))
                child = self._enter(fd, part, rel_root + part)
            finally:
                os.close(fd)
            if child is None:
                return None
            fd, rel_root = child, f"{rel_root}{part}/"
        return fd, rel_root

    def _enter(self, parent_fd: int | None, name: str, rel_root: str) -> int | None:
        """Open the subdirectory ``name`` beneath ``parent_fd``, or ``None`` if it cannot."""
        if parent_fd is None:  # never: a frame keeps its descriptor while a subdir is left
            return None
        try:
            return open_directory_at(name, parent_fd)
        except OSError as exc:
            if exc.errno in _SWAPPED:
                self.changed.append(rel_root)  # no longer a directory: swapped, not followed
            return None  # vanished or unreadable: skipped, as before

    def _push(
        self, stack: list[_Frame], fd: int, real: str, rel_base: str, rel_root: str, depth: int
    ) -> None:
        """Read the ``.gitignore`` and the entries of the directory ``fd``; stack it."""
        try:
            self.ignore.load_at(fd, rel_root.rstrip("/"))
            entries = self._scan(fd)
        except BaseException:
            os.close(fd)
            raise
        last_dir = max((i for i, (_, is_dir) in enumerate(entries) if is_dir), default=-1)
        stack.append(_Frame(fd, real, rel_base, rel_root, depth, entries, last_dir))

    def _scan(self, fd: int) -> list[tuple[str, bool | None]]:
        """The entries of the directory ``fd``, sorted by name; at most one past what the
        walk may still visit (the rest could never be reached), none if unreadable."""
        room = self.max_entries - self.visited
        found: list[tuple[str, bool | None]] = []
        try:
            with os.scandir(fd) as scan:
                for entry in scan:
                    if len(found) % _ENTRIES_PER_CHECK == _ENTRIES_PER_CHECK - 1:
                        self.stop()
                    try:
                        is_dir: bool | None = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = None
                    found.append((entry.name, is_dir))
                    if len(found) > room:
                        break
        except OSError:
            return []  # unreadable directory: skipped
        found.sort(key=lambda item: item[0])
        return found

    def note(self) -> str | None:
        """What the tool's ``note`` says about the walk (levels not entered, directories
        that changed, ``.gitignore`` lines skipped), or ``None`` if nothing."""
        notes = []
        if self.depth_capped:
            notes.append(
                f"directories {self.depth_cap} levels beneath the path were not entered "
                "(the walk's depth cap); list or search beneath a deeper path for more"
            )
        if self.changed:
            named = name_some([show(rel) for rel in self.changed])
            notes.append(
                f"directories that stopped being directories during the walk were not "
                f"entered ({named}); symlinks are never followed"
            )
        ignored = self.ignore.note()
        if ignored is not None:
            notes.append(ignored)
        return "; ".join(notes) if notes else None
