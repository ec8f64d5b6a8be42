"""A diffstat in git's format (``path | 3 ++-``, then the totals), from a diff's files.
No I/O.

Every face that shows what a run changed (the terminal after each run, ``runs diff``,
the chat's ``/diff``, ACP's ``/diff``) prints the same lines. Names are C-quoted as in
the patch (git's rule), so a file name holding an escape sequence or a newline prints
as inert text.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._diff import quote
from ._model import FileChange

MIN_GRAPH = 4
"""The fewest columns a file's ``+``/``-`` graph gets, however narrow the width."""


def quote_path(path: str) -> str:
    """A path as git names it in a patch and a diffstat: C-quoted when it holds a quote,
    a backslash, a control character or a byte outside ASCII (so it prints inert)."""
    return quote("", path)


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def diffstat_totals(files: Sequence[FileChange]) -> str:
    """``2 files changed, 3 insertions(+), 1 deletion(-)``, zero counts left out as git
    leaves them out (``no files changed`` for none)."""
    if not files:
        return "no files changed"
    added = sum(f.additions for f in files)
    deleted = sum(f.deletions for f in files)
    parts = [_plural(len(files), "file") + " changed"]
    if added:
        parts.append(_plural(added, "insertion") + "(+)")
    if deleted:
        parts.append(_plural(deleted, "deletion") + "(-)")
    return ", ".join(parts)


def _scaled(count: int, room: int, most: int) -> int:
    """git's ``scale_linear``: a changed file keeps at least one mark."""
    if most <= room or count == 0:
        return count
    return 1 + (count * (room - 1)) // most


def diffstat(files: Sequence[FileChange], width: int = 80) -> list[str]:
    """One line per file (``path | N +++--``; ``Bin`` for a binary file and one over
    the size cap, which is also marked ``(not captured)``; ``(new)`` or ``(gone)``
    after a created or deleted file's graph), each at most ``width`` columns where the
    names allow, then the totals line."""
    if not files:
        return [diffstat_totals(files)]
    names = [quote_path(f.path) for f in files]
    counts = [_count(f) for f in files]
    name_width = max(len(n) for n in names)
    count_width = max(len(c) for c in counts)
    suffixes = [_suffix(f) for f in files]
    fixed = count_width + 5 + max(map(len, suffixes))  # " NAME | COUNT GRAPH SUFFIX"
    room = max(MIN_GRAPH, width - name_width - fixed)
    if room == MIN_GRAPH and name_width > width // 2:  # long names: cut them, as git does
        name_width = max(10, width - fixed - MIN_GRAPH)
        names = [n if len(n) <= name_width else "..." + n[-(name_width - 3) :] for n in names]
    most = max((f.additions + f.deletions for f in files if not f.binary), default=0)
    lines = []
    for change, name, count, suffix in zip(files, names, counts, suffixes, strict=True):
        graph = ""
        if not change.binary:
            plus, minus = _marks(change.additions, change.deletions, room, most)
            graph = " " + "+" * plus + "-" * minus
        lines.append(f" {name:<{name_width}} | {count:>{count_width}}{graph}{suffix}".rstrip())
    lines.append(" " + diffstat_totals(files))
    return lines


_SUFFIX = {"added": " (new)", "deleted": " (gone)"}


def _marks(added: int, deleted: int, room: int, most: int) -> tuple[int, int]:
    """How many ``+`` and ``-`` marks: git's rounding (the smaller side scaled, the
    other the rest of the scaled total, both seen when both are non-zero)."""
    if most <= room:
        return added, deleted
    total = _scaled(added + deleted, room, most)
    if total < 2 and added and deleted:
        total = 2
    if added < deleted:
        plus = _scaled(added, room, most)
        return plus, total - plus
    minus = _scaled(deleted, room, most)
    return total - minus, minus


def _suffix(change: FileChange) -> str:
    return _SUFFIX.get(change.status, "") if change.captured else " (not captured)"


def _count(change: FileChange) -> str:
    if change.binary:
        return "Bin"
    return str(change.additions + change.deletions)
