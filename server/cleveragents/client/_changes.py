"""What the terminal shows of a run's changes to the workspace: the diffstat that ends
each run, a patch (coloured on a terminal), and what a revert or a restore did, would
do, or refused (its conflicts, and the command that undoes it).

Shared by ``cleveragents run``, ``runs diff|revert|restore`` and the chat's ``/diff``
and ``/undo``. It formats the run service's values (``DiffResult``, ``RestoreResult``)
and prints nothing itself; every line is printable (a patch's lines are a repository's
bytes, and a file name may hold an escape sequence).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ..checkpoints import DiffResult, FileChange, Note, RestoreResult, diffstat, quote_path
from ._terminal import printable

RESET = "\x1b[0m"
_COLOURS = (
    ("diff --git ", "\x1b[1m"), ("index ", "\x1b[1m"), ("--- ", "\x1b[1m"),
    ("+++ ", "\x1b[1m"), ("new file mode", "\x1b[1m"), ("deleted file mode", "\x1b[1m"),
    ("old mode", "\x1b[1m"), ("new mode", "\x1b[1m"), ("@@", "\x1b[36m"),
    ("+", "\x1b[32m"), ("-", "\x1b[31m"),
)  # fmt: skip
"""git's default colours: headers bold, hunk headers cyan, additions green, deletions
red (the longest prefixes first: ``+++ `` is a header, not an addition)."""

RESTORE_COMMAND = "cleveragents runs restore"
EXIT_CONFLICTS = 3
"""``runs revert`` and ``runs restore`` (and their dry runs) when conflicts refuse it:
nothing was changed (docs/cli.md, "Checkpoints")."""

_VERBS = {"added": "create", "modified": "restore", "deleted": "delete"}
_DONE = {"added": "created", "modified": "restored", "deleted": "deleted"}


def stat_lines(files: Sequence[FileChange], width: int = 80) -> list[str]:
    """The diffstat: one line per file and the totals, printable."""
    return [printable(line) for line in diffstat(files, width)]


def patch_lines(diff: DiffResult, colour: bool) -> list[str]:
    """The patch's lines, printable; coloured as git colours them when ``colour``."""
    lines = [printable(line) for line in diff.patch.splitlines()]
    if not colour:
        return lines
    return [_coloured(line) for line in lines]


def _coloured(line: str) -> str:
    for prefix, colour in _COLOURS:
        if line.startswith(prefix):
            return f"{colour}{line}{RESET}"
    return line


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _notes(notes: Sequence[Note]) -> list[str]:
    return [f"  {quote_path(note.path)}: {note.reason}" for note in notes]


def undo_command(checkpoint_id: str, root: str | None) -> str:
    """The command line that puts the workspace back to ``checkpoint_id``."""
    command = f"{RESTORE_COMMAND} {checkpoint_id}"
    return command if root is None else f"{command} --workspace {shlex.quote(root)}"


def restore_lines(
    result: RestoreResult, what: str, *, undo: str | None = None, force_hint: str = "--force"
) -> tuple[list[str], bool]:
    """What a revert or restore (``what``: ``revert of run 1a2b3c4d``) did, would do, or
    refused, for people; and whether conflicts refused it (or would, in a dry run).

    The files it changes (or would), each with what happens to it; the conflicts with
    their reasons; the paths it leaves alone; and, once applied, the checkpoint that
    undoes it and how (``undo``: the command, default ``runs restore``'s).
    ``force_hint`` says how to override conflicts (``--force``, ``/undo force``)."""
    refused = bool(result.conflicts) and not result.applied
    files = result.files
    if result.dry_run:
        head = f"{what}: would {_verbs_summary(files)}" if files else f"{what}: nothing to do"
    elif refused:
        head = f"{what}: refused, nothing was changed"
    elif result.applied:
        head = f"{what}: {_plural(len(files), 'file')} put back"
    else:
        head = f"{what}: nothing to do, the files are already so"
    lines = [head]
    verbs = _VERBS if result.dry_run or refused else _DONE
    width = max((len(verbs.get(f.status, f.status)) for f in files), default=0)
    lines += [f"  {verbs.get(f.status, f.status):<{width}}  {quote_path(f.path)}" for f in files]
    if result.conflicts:
        count = _plural(len(result.conflicts), "conflict")
        if refused:
            lines.append(f"{count}: changed since the last checkpoint (pass {force_hint} to "
                         "overwrite them)")  # fmt: skip
        else:
            lines.append(f"{count}, overwritten (forced):")
        lines += _notes(result.conflicts)
    if result.skipped:
        lines.append(f"left alone ({len(result.skipped)}):")
        lines += _notes(result.skipped)
    if result.dry_run:
        lines.append("dry run: nothing was changed")
    checkpoint = result.restore_checkpoint_id
    if result.applied and checkpoint:
        lines.append(f"undo it: {undo or undo_command(checkpoint, None)}")
        lines.append(f"  (checkpoint {checkpoint}: the files just before)")
    return [printable(line) for line in lines], refused


def _verbs_summary(files: Sequence[FileChange]) -> str:
    counts: dict[str, int] = {}
    for change in files:
        counts[change.status] = counts.get(change.status, 0) + 1
    return ", ".join(
        f"{_VERBS[status]} {_plural(counts[status], 'file')}"
        for status in ("modified", "added", "deleted")
        if status in counts
    )
