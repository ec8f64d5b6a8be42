"""A checkpoint from the few paths a caller knows changed, over the one before it.

A run whose iteration ran only the built-in file tools knows every path it wrote; the
rest of the workspace is, as far as the run is concerned, what its previous checkpoint
recorded. :func:`read_paths` reads just those paths (each directory on the way opened
beneath its parent with ``O_NOFOLLOW``, as the full read does) and :func:`apply`
writes the directories they sit in, so such a checkpoint costs a few reads instead of
an ``lstat`` of every entry.

Whatever a plain read of a file cannot settle gives up (:class:`NeedsFullRead`) and the
store reads the whole workspace instead: a path that is now a directory or a special
file, a ``.gitignore`` (its rules reach other entries), anything in or under ``.git``,
an entry that changed kind on the way, a path past the depth cap, beneath an entry that
was not captured or skipped, or in the store's own folder, and a workspace that would
pass the entry cap. :class:`Known` is what the store knew of the checkpoint it builds
on; this module knows nothing of the database.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from typing import NamedTuple

from cleveragents.workspace import GitIgnore

from ._files import Directories, Unreachable
from ._model import CheckpointSettings, Note
from ._scan import Scan, fingerprint
from ._tree import DIR, FILE, LINK, UNCAPTURED, Node, encode

_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIRECTORY = Node(DIR, 0, 0, b"")
"""In what :func:`read_paths` found: a directory that must be there (its entries are
the previous checkpoint's, or none when it is new)."""


class NeedsFullRead(Exception):
    """The named paths cannot settle this checkpoint: read the whole workspace."""


class Known(NamedTuple):
    """What the store recorded at checkpoint ``checkpoint_id`` (and still vouches for):
    its root tree, every captured directory's entries by relative path, the ignore
    rules it read, and its counts and notes."""

    checkpoint_id: str
    root: bytes
    dirs: dict[str, dict[str, Node]]
    ignore: GitIgnore
    entries: int
    files: int
    bytes: int
    not_captured: tuple[Note, ...]
    skipped: tuple[Note, ...]

    @classmethod
    def of_scan(cls, checkpoint_id: str, scan: Scan) -> Known:
        return cls(
            checkpoint_id,
            scan.root,
            {rel: memo.entries for rel, memo in scan.memo.items()},
            scan.ignore,
            scan.entries,
            scan.files,
            scan.bytes,
            tuple(scan.not_captured),
            tuple(scan.skipped),
        )


class Applied(NamedTuple):
    """The checkpoint :func:`apply` built: the store records ``root`` and ``trees``."""

    known: Known  # with an empty checkpoint id: the store names it when recorded
    trees: dict[bytes, bytes]
    decoded: dict[bytes, dict[str, Node]]
    """Both sides' trees of every directory that changed (for the changed paths)."""


def relative(root: str, path: str) -> str:
    """``path`` (absolute, or relative to ``root``) relative to ``root``; a path that is
    not strictly beneath ``root`` needs a full read."""
    if os.path.isabs(path):
        rel = os.path.relpath(os.path.normpath(path), root)
    else:
        rel = os.path.normpath(path)
    if rel in (".", "") or rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        raise NeedsFullRead(path)
    return rel.replace(os.sep, "/")


def read_paths(
    known: Known,
    paths: Iterable[str],
    dirs: Directories,
    settings: CheckpointSettings,
    skip_dirs: frozenset[tuple[int, int]],
    store: Callable[[bytes, bytes], None],
) -> dict[str, Node | None]:
    """What each path (relative) now holds: its node, or ``None`` when it is gone or
    ignored. Contents go to ``store``. :class:`NeedsFullRead` when a read cannot say."""
    found: dict[str, Node | None] = {}
    # Beneath a directory not captured, or at or beneath a skipped entry, only a full
    # read says what is there; a file not captured (too big, unreadable) is read again.
    above = {note.path for note in known.not_captured}
    skipped = {note.path for note in known.skipped}
    for rel in sorted(set(paths)):
        parts = rel.split("/")
        if ".git" in parts or parts[-1] == ".gitignore" or len(parts) > settings.max_depth:
            raise NeedsFullRead(rel)
        ignored_at = _ignored_at(known, parts)
        if ignored_at:
            found.setdefault(rel, None)  # not captured, as a full read would leave it
            # The directories a file tool made on the way to it are not ignored.
            holder = "/".join(parts[: ignored_at - 1])
            made = holder and _is_directory(holder, known, dirs)
            if made and found.setdefault(holder, _DIRECTORY) != _DIRECTORY:
                raise NeedsFullRead(holder)
            continue
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix in skipped or (depth < len(parts) and prefix in above):
                raise NeedsFullRead(rel)
        if found.get(rel) == _DIRECTORY:
            raise NeedsFullRead(rel)  # named as a file and as a directory
        node, reached = _read(rel, known, dirs, settings, skip_dirs, store)
        found[rel] = node
        holder = rel.rpartition("/")[0]
        # A directory made on the way is there, whatever became of the path.
        made = reached and holder and holder not in known.dirs
        if made and found.setdefault(holder, _DIRECTORY) != _DIRECTORY:
            raise NeedsFullRead(holder)
    return found


def _ignored_at(known: Known, parts: list[str]) -> int:
    """How many components lead to the first the ignore rules leave out (0: none is)."""
    if not known.ignore.files:
        return 0
    match = known.ignore.ignored
    for depth in range(1, len(parts)):
        if match("/".join(parts[:depth]), True):
            return depth
    return len(parts) if match("/".join(parts), False) else 0


def _is_directory(rel: str, known: Known, dirs: Directories) -> bool:
    """Whether ``rel`` is a directory now (reached without a link); ``False`` when it
    was never there; :class:`NeedsFullRead` when something else is in the way."""
    try:
        dirs.directory(rel)
    except Unreachable as exc:
        cause = exc.__cause__
        missing = isinstance(cause, OSError) and cause.errno == errno.ENOENT
        if missing and _gone_before(known, [*rel.split("/"), ""]):
            return False
        raise NeedsFullRead(rel) from None
    return True


def _gone_before(known: Known, parts: list[str]) -> bool:
    """Whether the first directory on the way that is not a known directory was absent
    at the previous checkpoint too (then nothing beneath it was there, nor is now)."""
    for depth in range(len(parts) - 1):
        prefix = "/".join(parts[: depth + 1])
        if prefix not in known.dirs:
            return known.dirs.get("/".join(parts[:depth]), {}).get(parts[depth]) is None
    return False


def _read(
    rel: str,
    known: Known,
    dirs: Directories,
    settings: CheckpointSettings,
    skip_dirs: frozenset[tuple[int, int]],
    store: Callable[[bytes, bytes], None],
) -> tuple[Node | None, bool]:
    """What is at ``rel`` now, and whether its directory was there to look in."""
    parent, _, name = rel.rpartition("/")
    try:
        dir_fd = dirs.directory(parent)
    except Unreachable as exc:
        cause = exc.__cause__
        missing = isinstance(cause, OSError) and cause.errno == errno.ENOENT
        if missing and _gone_before(known, rel.split("/")):
            return None, False  # never there: a path named that nothing made
        raise NeedsFullRead(rel) from None  # a directory on the way is gone or swapped
    parent_info = os.fstat(dir_fd)
    if (parent_info.st_dev, parent_info.st_ino) in skip_dirs:
        raise NeedsFullRead(rel)
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None, True
    except OSError:
        raise NeedsFullRead(rel) from None
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        try:
            target = os.fsencode(os.readlink(name, dir_fd=dir_fd))
        except OSError:
            raise NeedsFullRead(rel) from None
        digest = hashlib.sha256(target).digest()
        store(digest, target)
        return Node(LINK, 0, len(target), digest), True
    if not stat.S_ISREG(mode):
        raise NeedsFullRead(rel)  # a directory, or a special file: the full read notes it
    if info.st_size > settings.max_file_bytes:
        return Node(UNCAPTURED, stat.S_IMODE(mode), info.st_size, fingerprint(info)), True
    try:
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except OSError:
        raise NeedsFullRead(rel) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NeedsFullRead(rel)
        limit = settings.max_file_bytes + 1
        chunks = [os.read(fd, min(info.st_size + 1, limit))]
        total = len(chunks[0])
        while chunks[-1] and total < limit:
            chunks.append(os.read(fd, limit - total))
            total += len(chunks[-1])
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > settings.max_file_bytes:
        uncaptured = Node(UNCAPTURED, stat.S_IMODE(info.st_mode), info.st_size, fingerprint(info))
        return uncaptured, True
    digest = hashlib.sha256(data).digest()
    store(digest, data)
    return Node(FILE, stat.S_IMODE(info.st_mode), len(data), digest), True


def _counted(node: Node | None) -> tuple[int, int, int]:
    """What an entry adds to a checkpoint's entries, files and bytes (as a read counts)."""
    if node is None:
        return 0, 0, 0
    if node.kind == FILE:
        return 1, 1, node.size
    if node.kind == LINK:
        return 1, 1, 0
    return 1, 0, 0


def _make_directories(
    parts: list[str],
    count: int,
    dirs: dict[str, dict[str, Node]],
    copied: set[str],
    writable: Callable[[str], dict[str, Node]],
) -> int:
    """Make the first ``count`` directories of ``parts`` (the root first) writable,
    adding those that are new; how many were new."""
    made = 0
    for depth in range(count):
        prefix = "/".join(parts[:depth])
        if prefix in dirs:
            writable(prefix)
        else:
            up, _, last = prefix.rpartition("/")
            writable(up)[last] = Node(DIR, 0, 0, b"")  # its digest: written below
            dirs[prefix] = {}
            copied.add(prefix)
            made += 1
    return made


def apply(known: Known, found: dict[str, Node | None], settings: CheckpointSettings) -> Applied:
    """``known``'s tree with each path set to what was found: the directories on the
    way written bottom up (a new one made for a path whose directory is new, as the file
    tools make them)."""
    dirs = dict(known.dirs)
    copied: set[str] = set()
    decoded: dict[bytes, dict[str, Node]] = {}
    entries, files, size = known.entries, known.files, known.bytes
    notes = {note.path: note for note in known.not_captured}

    def writable(rel: str) -> dict[str, Node]:
        """The entries of the directory ``rel``, copied once before they change."""
        if rel not in copied:
            parent, _, name = rel.rpartition("/")
            node = dirs[parent].get(name) if rel else None
            digest = known.root if not rel else node.digest if node is not None else None
            old = dirs.get(rel)
            if old is not None and digest is not None:
                decoded[digest] = old
            dirs[rel] = dict(old) if old is not None else {}
            copied.add(rel)
        return dirs[rel]

    for rel, node in found.items():
        parts = rel.split("/")
        if node == _DIRECTORY:
            if rel not in dirs:
                for depth in range(len(parts)):  # the directories down to it, new ones made
                    up, name = "/".join(parts[:depth]), parts[depth]
                    here = dirs.get(up, {}).get(name)
                    if here is not None and here.kind != DIR:
                        raise NeedsFullRead(rel)  # a file or a link became a directory
                entries += _make_directories(parts, len(parts) + 1, dirs, copied, writable)
            continue
        parent, name = rel.rpartition("/")[0], parts[-1]
        exists = True
        for depth in range(len(parts) - 1):
            here = dirs.get("/".join(parts[:depth]), {}).get(parts[depth])
            if here is None:
                exists = False
                break
            if here.kind != DIR:
                raise NeedsFullRead(rel)  # a file or a link became a directory
        old = dirs.get(parent, {}).get(name) if exists else None
        if old is not None and old.kind == DIR:
            raise NeedsFullRead(rel)  # a directory became something else
        if old == node:
            continue
        entries += _make_directories(parts, len(parts), dirs, copied, writable)
        siblings = dirs[parent]
        if node is None:
            siblings.pop(name, None)
        else:
            siblings[name] = node
        gone, added = _counted(old), _counted(node)
        entries += added[0] - gone[0]
        files += added[1] - gone[1]
        size += added[2] - gone[2]
        notes.pop(rel, None)
        if node is not None and node.kind == UNCAPTURED:
            cap = settings.max_file_bytes
            notes[rel] = Note(rel, f"{node.size} bytes, over the {cap}-byte cap")
    if entries > settings.max_entries:
        raise NeedsFullRead("the entry cap")  # the full read refuses it, in words
    trees: dict[bytes, bytes] = {}
    root = known.root
    for rel in sorted(copied, key=lambda p: p.count("/") if p else -1, reverse=True):
        data, digest = encode(dirs[rel])
        trees[digest] = data
        decoded[digest] = dirs[rel]
        if rel:
            up, _, last = rel.rpartition("/")
            dirs[up][last] = Node(DIR, 0, 0, digest)
        else:
            root = digest
    new = Known(
        "",
        root,
        dirs,
        known.ignore,
        entries,
        files,
        size,
        tuple(sorted(notes.values(), key=lambda note: note.path)),
        known.skipped,
    )
    return Applied(new, trees, decoded)
