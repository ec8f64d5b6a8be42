"""Trees: one directory's entries, content-addressed, as git's trees are.

A checkpoint is the digest of its root tree. Each tree lists its entries sorted by name,
each a :class:`Node`: a file (its permission bits, size and content digest), a symbolic
link (its target's digest), a directory (its tree's digest) or an entry not captured
(a fingerprint of its size and times). An unchanged directory keeps its digest, so two
checkpoints are compared by descending only where digests differ.

This module knows nothing of the workspace nor of the database: trees come from a
:class:`TreeSource`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from typing import NamedTuple, Protocol

FILE, LINK, DIR, UNCAPTURED = b"f", b"l", b"d", b"u"
_ENTRY = struct.Struct(">1sIQ32s")
_COUNT = struct.Struct(">I")


class Node(NamedTuple):
    """One entry of a tree. ``kind``: :data:`FILE`, :data:`LINK`, :data:`DIR` or
    :data:`UNCAPTURED`; ``mode``: permission bits of a file (0 otherwise)."""

    kind: bytes
    mode: int
    size: int
    digest: bytes


Change = tuple[str, Node | None, Node | None]
"""A path and its node on each side (``None``: absent)."""


class TreeSource(Protocol):
    def tree(self, digest: bytes) -> dict[str, Node]:
        """The entries of the tree ``digest``."""
        ...


def encode(entries: dict[str, Node]) -> tuple[bytes, bytes]:
    """A tree's bytes and digest: the entries' fixed fields sorted by name, then their
    names joined by NUL (a name never holds one)."""
    names = sorted(entries)
    pack = _ENTRY.pack
    fields = [pack(*entries[name]) for name in names]
    data = b"".join(
        [
            _COUNT.pack(len(names)),
            *fields,
            b"\0".join(n.encode("utf-8", "surrogateescape") for n in names),
        ]
    )
    return data, hashlib.sha256(b"tree\0" + data).digest()


def decode(data: bytes) -> dict[str, Node]:
    (count,) = _COUNT.unpack_from(data)
    end = _COUNT.size + count * _ENTRY.size
    if not count:
        return {}
    names = data[end:].decode("utf-8", "surrogateescape").split("\0")
    nodes = map(Node._make, _ENTRY.iter_unpack(data[_COUNT.size : end]))
    return dict(zip(names, nodes, strict=True))


EMPTY_TREE, EMPTY_DIGEST = encode({})


def join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def walk(source: TreeSource, digest: bytes, prefix: str = "") -> Iterator[tuple[str, Node]]:
    """Every entry beneath the tree ``digest``, directories before their content."""
    for name, node in sorted(source.tree(digest).items()):
        path = join(prefix, name)
        yield path, node
        if node.kind == DIR:
            yield from walk(source, node.digest, path)


def same(a: Node | None, b: Node | None) -> bool:
    """Whether two nodes hold the same thing (a directory's size is not compared)."""
    if a is None or b is None:
        return a is b
    return a.kind == b.kind and a.digest == b.digest and a.mode == b.mode


def compare(source: TreeSource, a: bytes | None, b: bytes | None, prefix: str = "") -> list[Change]:
    """What differs between the trees ``a`` and ``b`` (``None``: no tree), sorted by
    path. A directory on one side only is listed, then everything beneath it."""
    changes: list[Change] = []
    _compare(source, a, b, prefix, changes)
    return changes


def _compare(
    source: TreeSource, a: bytes | None, b: bytes | None, prefix: str, out: list[Change]
) -> None:
    if a == b:
        return
    left = source.tree(a) if a is not None else {}
    right = source.tree(b) if b is not None else {}
    for name in sorted(left.keys() | right.keys()):
        old, new = left.get(name), right.get(name)
        if same(old, new):
            continue
        path = join(prefix, name)
        old_dir = old is not None and old.kind == DIR
        new_dir = new is not None and new.kind == DIR
        if old_dir and new_dir:
            assert old is not None
            assert new is not None
            _compare(source, old.digest, new.digest, path, out)
            continue
        out.append((path, old, new))
        if old_dir or new_dir:
            _compare(
                source,
                old.digest if old_dir and old is not None else None,
                new.digest if new_dir and new is not None else None,
                path,
                out,
            )


def lookup(source: TreeSource, root: bytes, path: str) -> Node | None:
    """The node at ``path`` beneath the tree ``root``, or ``None``."""
    digest = root
    node: Node | None = None
    for part in path.split("/"):
        if node is not None and node.kind != DIR:
            return None
        node = source.tree(digest).get(part)
        if node is None:
            return None
        digest = node.digest
    return node


class TreeEditor:
    """Edits a tree by path and writes the directories that changed (bottom up).

    Used to record the workspace as a restore left it without reading it again."""

    def __init__(self, source: TreeSource, root: bytes) -> None:
        self._source = source
        self._dirs: dict[str, dict[str, Node]] = {}
        self._root = root

    def _entries(self, path: str) -> dict[str, Node]:
        found = self._dirs.get(path)
        if found is not None:
            return found
        if path == "":
            entries = dict(self._source.tree(self._root))
        else:
            parent, _, name = path.rpartition("/")
            node = self._entries(parent).get(name)
            entries = dict(self._source.tree(node.digest)) if node and node.kind == DIR else {}
            if node is None or node.kind != DIR:
                self._entries(parent)[name] = Node(DIR, 0, 0, EMPTY_DIGEST)
        self._dirs[path] = entries
        return entries

    def set(self, path: str, node: Node | None) -> None:
        """Put ``node`` at ``path`` (``None``: remove it), creating parent directories."""
        parent, _, name = path.rpartition("/")
        entries = self._entries(parent)
        if node is None:
            entries.pop(name, None)
            self._dirs.pop(path, None)
            prefix = path + "/"
            for key in [key for key in self._dirs if key.startswith(prefix)]:
                del self._dirs[key]
        elif node.kind == DIR:
            if path not in self._dirs:
                old = entries.get(name)
                self._dirs[path] = (
                    dict(self._source.tree(old.digest)) if old and old.kind == DIR else {}
                )
            entries[name] = Node(DIR, 0, 0, EMPTY_DIGEST)
        else:
            entries[name] = node
            self._dirs.pop(path, None)

    def write(self) -> tuple[bytes, dict[bytes, bytes]]:
        """The new root digest, and the trees written (digest -> bytes)."""
        written: dict[bytes, bytes] = {}
        for path in sorted(self._dirs, key=lambda p: p.count("/") if p else -1, reverse=True):
            data, digest = encode(self._dirs[path])
            written[digest] = data
            if path:
                parent, _, name = path.rpartition("/")
                self._dirs[parent][name] = Node(DIR, 0, 0, digest)
            else:
                self._root = digest
        return self._root, written
