"""One read of the workspace into trees: what a checkpoint captures.

The read goes by directory descriptors from the root's, each directory opened beneath
its parent with ``O_NOFOLLOW`` and each file opened the same way, so a name swapped for
a link while it runs is skipped, never followed. It skips ``.git`` (a folder or a file,
at any depth: the workspace's repository is never read) and what the workspace's
``.gitignore`` files ignore (the file tools' matcher,
:class:`cleveragents.workspace.GitIgnore`). Links are recorded with their targets,
unread; FIFOs, sockets and devices are skipped and noted; a file over the size cap and a
directory over the depth cap are recorded as not captured.

A file whose size, times, inode and mode match the stat cache is not read again. A read
is trusted for the next checkpoint only when the file's times are older than
:data:`RACY_NS` before the read started: a file written in the same tick of the file
system's clock as the read could change again with no visible difference
(git's "racily clean" entries).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from collections.abc import Callable
from typing import NamedTuple

from cleveragents.workspace import GitIgnore

from ._db import CacheEntry, CacheKey, cache_key
from ._errors import CheckpointError
from ._model import CheckpointSettings, Note
from ._tree import DIR, FILE, LINK, UNCAPTURED, Node, encode

RACY_NS = 2_000_000_000
"""Files whose times are this close to a read are read again next time (2 s: the
coarsest common file system clock, FAT's)."""

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_GITIGNORE_MAX_BYTES = 1024 * 1024  # as the file tools read it
_SWAPPED = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENOENT})
_NEVER_READ = frozenset({".git"})
_S_IFMT, _S_IFREG = 0o170000, stat.S_IFREG


class DirectoryMemo(NamedTuple):
    """What the last read of a directory found: reused when its rules and listing (or
    its entries) are the same again, so an unchanged directory costs no matching and no
    encoding."""

    rules: bytes
    listing: tuple[tuple[str, bool], ...]
    ignored: frozenset[str]
    entries: dict[str, Node]
    data: bytes
    digest: bytes


def special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def fingerprint(info: os.stat_result) -> bytes:
    """Stands for the content of an entry that is not captured: changes when it does."""
    return hashlib.sha256(repr(cache_key(info)).encode()).digest()


def open_root(root: str, identity: tuple[int, int]) -> int:
    """A descriptor of the workspace root, which must still be the directory it was."""
    try:
        fd = os.open(root, _DIRECTORY)
    except OSError as exc:
        raise CheckpointError(f"cannot open the workspace {root}: {exc.strerror}") from None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != identity:
        os.close(fd)
        raise CheckpointError(f"the workspace {root} was moved or replaced")
    return fd


class Scan:
    """Reads the workspace beneath ``root_fd`` (see the module docstring).

    ``store`` receives each content not stored yet (digest, bytes); without it, contents
    are not kept and ``pending`` says where each new digest was read, to read it again.
    After :meth:`run`: ``root`` (the root tree's digest), ``trees`` (every tree, digest
    -> bytes), ``cache`` (the reads to trust next time), :meth:`key_of` (each file's
    :data:`CacheKey`, for a restore to check nothing changed since), ``not_captured``,
    ``skipped``, ``files`` and ``bytes``.
    """

    def __init__(
        self,
        settings: CheckpointSettings,
        cache: dict[str, CacheEntry],
        store: Callable[[bytes, bytes], None] | None,
        skip_dirs: frozenset[tuple[int, int]] = frozenset(),
        memo: dict[str, DirectoryMemo] | None = None,
    ) -> None:
        self.settings = settings
        self.old_cache = cache
        self.store = store
        self.skip_dirs = skip_dirs
        self._memo = memo or {}
        self.memo: dict[str, DirectoryMemo] = {}
        self.ignore = GitIgnore()
        self.trees: dict[bytes, bytes] = {}
        self.cache: dict[str, CacheEntry] = {}
        self.cache_added: list[str] = []  # the reads new in ``cache``
        self.seen: dict[str, CacheKey] = {}
        self.pending: dict[bytes, str] = {}
        self.not_captured: list[Note] = []
        self.skipped: list[Note] = []
        self.files = 0
        self.bytes = 0
        self.entries = 0
        self.root = b""
        self._trust_before = 0

    def run(self, root_fd: int) -> bytes:
        self._trust_before = time.time_ns() - RACY_NS
        self.root = self._directory(root_fd, "", 1)
        self.skipped.sort(key=lambda note: note.path)
        self.not_captured.sort(key=lambda note: note.path)
        return self.root

    def _directory(self, fd: int, rel: str, depth: int, parent_rules: bytes = b"") -> bytes:
        rules = self._rules(fd, rel, parent_rules)
        prefix = rel + "/" if rel else ""
        with os.scandir(fd) as scan:
            listed = list(scan)  # in the file system's order: a tree sorts its names
        listing = tuple([(e.name, e.is_dir(follow_symlinks=False)) for e in listed])
        memo = self._memo.get(rel)
        if memo is not None and memo.rules == rules and memo.listing == listing:
            ignored = memo.ignored
        elif self.ignore.files:
            match = self.ignore.ignored
            ignored = frozenset(n for n, is_dir in listing if match(prefix + n, is_dir))
        else:
            ignored = frozenset()
        self.entries += len(listing) - len(ignored)
        if self.entries > self.settings.max_entries:
            raise CheckpointError(
                f"the workspace holds more than {self.settings.max_entries} entries "
                "(not counting ignored ones); a partial checkpoint could not be restored "
                "safely, so none was taken"
            )
        entries: dict[str, Node] = {}
        before = memo.entries if memo is not None else {}
        is_dir, is_link = stat.S_ISDIR, stat.S_ISLNK
        old_cache, cache, files, size = self.old_cache, self.cache, 0, 0
        skip = ignored | _NEVER_READ if ignored else _NEVER_READ
        # The loop below runs once per entry of the workspace: it is kept to the fewest
        # lookups and calls (a later checkpoint is mostly this loop and the lstat calls).
        for entry in listed:
            name = entry.name
            if name in skip:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished since it was listed
            mode = info.st_mode
            node: Node | None
            if mode & _S_IFMT == _S_IFREG:
                path = prefix + name
                key = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, mode)
                cached = old_cache.get(path)
                if cached is not None and cached[0] == key:
                    # Unchanged since a trusted read: no read, and the last node reused.
                    cache[path] = cached
                    files += 1
                    size += key[0]
                    node = before.get(name)
                    if node is None or node[3] != cached[1] or node[1] != mode & 0o7777:
                        node = Node(FILE, mode & 0o7777, key[0], cached[1])
                else:
                    node = self._file(fd, name, path, info)
            elif is_dir(mode):
                node = self._subdirectory(fd, name, prefix + name, depth, info, rules)
            elif is_link(mode):
                node = self._link(fd, name, prefix + name)
            else:
                self.skipped.append(Note(prefix + name, f"{special_kind(mode)}: not captured"))
                node = None
            if node is not None:
                entries[name] = node
        self.files += files
        self.bytes += size
        if memo is not None and memo.entries == entries:
            data, digest = memo.data, memo.digest
        else:
            data, digest = encode(entries)
        self.trees[digest] = data
        self.memo[rel] = DirectoryMemo(rules, listing, ignored, entries, data, digest)
        return digest

    def _rules(self, fd: int, rel: str, parent_rules: bytes) -> bytes:
        """Add the directory's ``.gitignore`` (read as the file tools read it: a regular
        file, never a link, at most 1 MiB) to the matcher; a digest of every rule that
        applies beneath it."""
        text = None
        try:
            ignore_fd = os.open(".gitignore", _FILE, dir_fd=fd)
        except OSError:
            ignore_fd = -1
        if ignore_fd >= 0:
            try:
                if stat.S_ISREG(os.fstat(ignore_fd).st_mode):
                    text = os.read(ignore_fd, _GITIGNORE_MAX_BYTES)
            finally:
                os.close(ignore_fd)
        if text is None:
            return parent_rules
        self.ignore.add_text(text.decode("utf-8", "replace"), rel)
        return hashlib.sha256(
            parent_rules + rel.encode("utf-8", "surrogateescape") + b"\0" + text
        ).digest()

    def _subdirectory(
        self, fd: int, name: str, path: str, depth: int, info: os.stat_result, rules: bytes
    ) -> Node | None:
        if (info.st_dev, info.st_ino) in self.skip_dirs:
            self.skipped.append(Note(path, "the checkpoint store itself: not captured"))
            return None
        if depth >= self.settings.max_depth:
            reason = f"a directory {depth} levels deep (the cap is {self.settings.max_depth})"
            self.not_captured.append(Note(path, reason))
            return Node(UNCAPTURED, 0, 0, fingerprint(info))
        try:
            child = os.open(name, _DIRECTORY, dir_fd=fd)
        except OSError as exc:
            if exc.errno in _SWAPPED:
                self.skipped.append(Note(path, "changed while it was read: not captured"))
                return None
            return self._unreadable(path, info, exc)
        try:
            return Node(DIR, 0, 0, self._directory(child, path, depth + 1, rules))
        finally:
            os.close(child)

    def _file(self, fd: int, name: str, path: str, info: os.stat_result) -> Node | None:
        """Read a file the stat cache does not vouch for."""
        if info.st_size > self.settings.max_file_bytes:
            return self._too_big(path, info)
        read = self._read(fd, name, path, info)
        if read is None or isinstance(read, Node):
            return read
        info, data = read
        key = cache_key(info)
        if len(data) > self.settings.max_file_bytes:
            return self._too_big(path, info)
        digest = hashlib.sha256(data).digest()
        if self.store is not None:
            self.store(digest, data)
        else:
            self.pending.setdefault(digest, path)
        if info.st_mtime_ns < self._trust_before and info.st_ctime_ns < self._trust_before:
            self.cache[path] = (key, digest)
            self.cache_added.append(path)
        else:
            self.seen[path] = key
        self.files += 1
        self.bytes += key[0]
        return Node(FILE, key[4] & 0o7777, key[0], digest)

    def key_of(self, path: str) -> CacheKey | None:
        """The status of the file at ``path`` when this read saw it."""
        found = self.seen.get(path)
        if found is None:
            cached = self.cache.get(path)
            found = cached[0] if cached is not None else None
        return found

    def _too_big(self, path: str, info: os.stat_result) -> Node:
        cap = self.settings.max_file_bytes
        self.not_captured.append(Note(path, f"{info.st_size} bytes, over the {cap}-byte cap"))
        self.seen[path] = cache_key(info)
        return Node(UNCAPTURED, stat.S_IMODE(info.st_mode), info.st_size, fingerprint(info))

    def _unreadable(self, path: str, info: os.stat_result, exc: OSError) -> Node:
        """An entry that cannot be read is not captured, so that no restore touches it."""
        self.not_captured.append(Note(path, f"unreadable ({exc.strerror})"))
        self.seen[path] = cache_key(info)
        return Node(UNCAPTURED, stat.S_IMODE(info.st_mode), info.st_size, fingerprint(info))

    def _read(
        self, dir_fd: int, name: str, path: str, listed: os.stat_result
    ) -> tuple[os.stat_result, bytes] | Node | None:
        """The file's status and content, read through one descriptor that is no link
        (a node when it is not captured)."""
        try:
            fd = os.open(name, _FILE, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in _SWAPPED:
                self.skipped.append(Note(path, "changed while it was read: not captured"))
                return None
            return self._unreadable(path, listed, exc)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                self.skipped.append(Note(path, f"{special_kind(info.st_mode)}: not captured"))
                return None
            limit = self.settings.max_file_bytes + 1
            chunks = [os.read(fd, min(info.st_size + 1, limit))]
            total = len(chunks[0])
            while chunks[-1] and total < limit:
                chunks.append(os.read(fd, limit - total))
                total += len(chunks[-1])
            return info, b"".join(chunks)
        finally:
            os.close(fd)

    def _link(self, fd: int, name: str, path: str) -> Node | None:
        try:
            target = os.fsencode(os.readlink(name, dir_fd=fd))
        except OSError:
            self.skipped.append(Note(path, "changed while it was read: not captured"))
            return None
        digest = hashlib.sha256(target).digest()
        if self.store is not None:
            self.store(digest, target)
        else:
            self.pending.setdefault(digest, path)
        self.files += 1
        return Node(LINK, 0, len(target), digest)
