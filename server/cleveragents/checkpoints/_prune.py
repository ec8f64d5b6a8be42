"""Which checkpoints pruning removes, and which contents and trees go with them.

Contents and trees are shared between checkpoints, so removing one frees only what no
other still reaches. The graph of what the checkpoints reach is counted once: each tree
and content has a count of the trees and checkpoints that refer to it; removing a
checkpoint drops its root's count, and whatever falls to zero drops its children's, so
each removal costs only what it frees. Checkpoints older than the retention go first,
then the oldest while the stored bytes are over the cap; protected ones never.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ._tree import DIR, FILE, LINK, Node

Children = dict[bytes, list[bytes]]


def reachable(
    roots: Iterable[bytes], tree: Callable[[bytes], dict[str, Node] | None]
) -> tuple[Children, set[bytes]]:
    """Every tree reached from ``roots`` with its children's digests, and every content."""
    trees: Children = {}
    contents: set[bytes] = set()
    stack = list(roots)
    while stack:
        digest = stack.pop()
        if digest in trees:
            continue
        entries = tree(digest)
        children: list[bytes] = []
        for node in (entries or {}).values():
            if node.kind == DIR:
                children.append(node.digest)
                stack.append(node.digest)
            elif node.kind in (FILE, LINK):
                children.append(node.digest)
                contents.add(node.digest)
        trees[digest] = children
    return trees, contents


class Counts:
    """Reference counts over the reached graph, and the bytes it holds."""

    def __init__(self, roots: list[bytes], trees: Children, sizes: dict[bytes, int]) -> None:
        self.trees = trees
        self.sizes = sizes
        self.refs: dict[bytes, int] = {}
        for children in trees.values():
            for child in children:
                self.refs[child] = self.refs.get(child, 0) + 1
        for root in roots:
            self.refs[root] = self.refs.get(root, 0) + 1
        self.bytes = sum(sizes.get(digest, 0) for digest in self.refs)

    def drop(self, root: bytes) -> None:
        """One reference to ``root`` less (a checkpoint removed)."""
        stack = [root]
        while stack:
            digest = stack.pop()
            left = self.refs[digest] - 1
            if left:
                self.refs[digest] = left
                continue
            del self.refs[digest]
            self.bytes -= self.sizes.get(digest, 0)
            stack.extend(self.trees.get(digest, ()))

    def alive(self) -> set[bytes]:
        return set(self.refs)
