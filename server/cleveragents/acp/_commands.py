"""ACP's slash commands: ``/diff``, ``/undo`` and ``/restore``, advertised to the client
with ``available_commands_update`` and answered by the agent itself (a prompt that
starts with one is never sent to the model).

- ``/diff``: what the session's turns changed in the workspace (from before the first
  change of its first turn to after its last), as a diffstat and the patch in a fenced
  ``diff`` block.
- ``/undo [force]``: the last turn's files put back through the run service's revert;
  a file changed since by someone else refuses it, changing nothing, unless ``force``.
  Once done, the turn leaves the session's conversation (the next prompt goes on from
  before it) and the reply names ``/restore CHECKPOINT`` to undo the undo.
- ``/restore CHECKPOINT [force]``: the workspace's files as they were at a checkpoint of
  the session's workspace, under the same conflict rule.

It formats the run service's values; the checkpoints are the service's.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..checkpoints import FileChange, Note, RestoreResult, diffstat, quote_path
from ..tool import CleverAgentsError

if TYPE_CHECKING:
    from ._session import Session

COMMANDS: list[dict[str, Any]] = [
    {"name": "diff", "description": "What this session changed in the workspace: a diffstat "
     "and the patch"},
    {"name": "undo", "description": "Put back the files the last turn changed (refused, "
     "changing nothing, when you changed one since)",
     "input": {"hint": "force: overwrite files changed since"}},
    {"name": "restore", "description": "Put the files back as they were at a checkpoint "
     "(the one /undo names undoes it)", "input": {"hint": "CHECKPOINT_ID [force]"}},
]  # fmt: skip
"""ACP's ``AvailableCommand`` list: ``name``, ``description``, ``input.hint``."""
_NAMES = {str(command["name"]) for command in COMMANDS}
_COMMAND = re.compile(r"/([a-z]+)(?:\s+(.*))?", re.S)
MAX_PATCH_CHARS = 200_000
"""A ``/diff`` reply's patch is cut here (the command line's ``runs diff`` has it all)."""
STAT_WIDTH = 80


def available_commands() -> dict[str, Any]:
    """The ``session/update`` that advertises the commands."""
    return {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS}


def parse(text: str) -> tuple[str, str] | None:
    """``(name, argument)`` when the prompt is one of the commands; ``None`` otherwise
    (another ``/word`` goes to the model, as typed)."""
    found = _COMMAND.fullmatch(text.strip())
    if found is None or found.group(1) not in _NAMES:
        return None
    return found.group(1), (found.group(2) or "").strip()


async def run(session: Session, name: str, argument: str) -> str:
    """The reply to ``/NAME ARGUMENT`` (markdown); errors are replies too. One command
    of a session at a time: two quick ``/undo`` undo two turns, one after the other."""
    lock = _locks.setdefault(session, asyncio.Lock())
    async with lock:
        return await _run(session, name, argument)


_locks: weakref.WeakKeyDictionary[Session, asyncio.Lock] = weakref.WeakKeyDictionary()


async def _run(session: Session, name: str, argument: str) -> str:
    try:
        if name == "diff":
            return await _diff(session, argument)
        if name == "undo":
            return await _undo(session, argument)
        return await _restore(session, argument)
    except CleverAgentsError as exc:
        return f"/{name}: {exc.message}"


async def _diff(session: Session, argument: str) -> str:
    if argument:
        return "/diff takes no argument"
    diff = await session.service.diff_runs(session.roots[0], list(session.meta["runs"]))
    if not diff.files:
        return "This session changed no files."
    stat = "\n".join(diffstat(diff.files, STAT_WIDTH))
    patch = diff.patch
    cut = ""
    if len(patch) > MAX_PATCH_CHARS:
        patch = patch[:MAX_PATCH_CHARS].rsplit("\n", 1)[0] + "\n"
        cut = (f"\n(the patch is cut at {MAX_PATCH_CHARS:,} characters: `cleveragents runs "
               "diff RUN_ID` shows each turn's whole)")  # fmt: skip
    return f"```\n{stat}\n```\n\n{fenced(patch, 'diff')}{cut}"


async def _undo(session: Session, argument: str) -> str:
    if argument not in ("", "force"):
        return "/undo takes nothing, or `force` to overwrite files changed since"
    runs: list[str] = session.meta["runs"]
    if not runs:
        return "/undo: no turn of this session to undo"
    run_id = runs[-1]
    result = await session.service.revert(run_id, force=argument == "force")
    refused = bool(result.conflicts) and not result.applied
    text = _report(result, "the last turn", "/undo force", refused)
    if refused:
        return text
    runs.pop()
    failed: list[str] = session.meta.get("failed", [])
    if run_id in failed:
        failed.remove(run_id)
    session.store.save(session.meta)
    return text + "\n\nThe next prompt goes on from before that turn."


async def _restore(session: Session, argument: str) -> str:
    checkpoint, _, force = argument.partition(" ")
    if not checkpoint or force.strip() not in ("", "force"):
        return "/restore takes a checkpoint id (as /undo names it), then `force` or nothing"
    root = await session.service.checkpoint_root(checkpoint, session.roots)
    result = await session.service.restore_checkpoint(
        checkpoint, root=root, force=bool(force.strip())
    )
    refused = bool(result.conflicts) and not result.applied
    return _report(result, f"checkpoint {checkpoint}", f"/restore {checkpoint} force", refused)


_DONE = {"added": "created", "modified": "restored", "deleted": "deleted"}


def _report(result: RestoreResult, what: str, force_hint: str, refused: bool) -> str:
    """A revert's or restore's reply: the files, the conflicts, how to undo it."""
    if refused:
        lines = [f"Nothing was changed: {_plural(len(result.conflicts), 'file')} changed since "
                 f"the last checkpoint (`{force_hint}` overwrites them):"]  # fmt: skip
        lines += _notes(result.conflicts)
        lines += ["", "It would have:", *_files(result.files, "restore")]
        return "\n".join(lines)
    if not result.applied:
        return f"Nothing to put back: {what} changed no files that differ now."
    lines = [f"Put back {_plural(len(result.files), 'file')} of {what}:", *_files(result.files)]
    if result.conflicts:
        lines += ["", "Overwritten (forced):", *_notes(result.conflicts)]
    if result.skipped:
        lines += ["", "Left alone:", *_notes(result.skipped)]
    if result.restore_checkpoint_id:
        lines += ["", f"To undo this: `/restore {result.restore_checkpoint_id}`"]
    return "\n".join(lines)


def _files(files: Sequence[FileChange], verb: str | None = None) -> list[str]:
    words = {"added": "create", "modified": "restore", "deleted": "delete"} if verb else _DONE
    return [f"- {words.get(f.status, f.status)} `{quote_path(f.path)}`" for f in files]


def _notes(notes: Sequence[Note]) -> list[str]:
    return [f"- `{quote_path(note.path)}`: {note.reason}" for note in notes]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def fenced(text: str, language: str = "") -> str:
    """``text`` in a fenced block no line of it can close (a longer fence)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"
