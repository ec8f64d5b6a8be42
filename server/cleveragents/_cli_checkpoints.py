"""``cleveragents runs diff|revert|restore``: what a run changed in its workspace, and
putting it back, on a run service built in this process (no daemon).

The run service owns the checkpoints (``RunService.diff``, ``revert``,
``restore_checkpoint``); this module resolves the run (an id or a unique prefix, as
``runs show``), calls it, and prints what came back through ``client._changes``. The
patch is coloured on a terminal (not with ``NO_COLOR``), plain in a pipe.

Exit codes: 0 done (or a dry run that would apply), 1 an unknown run or checkpoint, a
live run, a store that cannot do it, 3 refused by conflicts (nothing changed), 2 a
usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

EXIT_FAILED = 1


def checkpoints_command(args: argparse.Namespace, state_dir: Path) -> int:
    """``runs diff``, ``runs revert`` or ``runs restore`` (``args.runs_command``)."""
    from .client._terminal import printable
    from .tool import CleverAgentsError

    try:
        return asyncio.run(_command(args, state_dir))
    except CleverAgentsError as exc:
        print(printable(f"cleveragents runs {args.runs_command}: {exc.message}"), file=sys.stderr)
        return EXIT_FAILED


async def _command(args: argparse.Namespace, state_dir: Path) -> int:
    from .runs import RunService, RunSettings

    service = RunService(RunSettings(state_dir=state_dir), [])
    try:
        if args.runs_command == "diff":
            return await _diff(service, args)
        if args.runs_command == "revert":
            return await _revert(service, args)
        return await _restore(service, args)
    finally:
        await service.aclose()


def _run_id(service: Any, text: str) -> str:
    from ._cli_runs import resolve

    return resolve(service.store, text)


def _colour(stream: Any) -> bool:
    try:
        return bool(stream.isatty()) and not os.environ.get("NO_COLOR")
    except (OSError, ValueError):
        return False


def _width() -> int:
    import shutil

    return min(shutil.get_terminal_size((80, 24)).columns, 120)


async def _diff(service: Any, args: argparse.Namespace) -> int:
    from .client._changes import patch_lines, stat_lines

    diff = await service.diff(_run_id(service, args.run_id), args.iteration)
    lines = stat_lines(diff.files, _width())
    if not args.stat and diff.patch:
        lines += ["", *patch_lines(diff, _colour(sys.stdout))]
    print("\n".join(lines))
    return 0


async def _revert(service: Any, args: argparse.Namespace) -> int:
    run_id = _run_id(service, args.run_id)
    result = await service.revert(
        run_id, to_iteration=args.to_iteration, dry_run=args.dry_run, force=args.force
    )
    return _report(result, f"revert of run {run_id}", await _root_of(service, run_id))


async def _restore(service: Any, args: argparse.Namespace) -> int:
    if args.workspace is not None:
        root = args.workspace.expanduser().resolve()
    else:  # the workspace whose store holds it: the id names one checkpoint of one store
        root = await service.checkpoint_root(args.checkpoint_id, [os.sep])
    result = await service.restore_checkpoint(
        args.checkpoint_id, root=str(root), dry_run=args.dry_run, force=args.force
    )
    return _report(result, f"restore of checkpoint {args.checkpoint_id}", str(root))


async def _root_of(service: Any, run_id: str) -> str | None:
    from ._cli_runs import facts

    return (await asyncio.to_thread(facts, service.store, run_id)).workspace


def _report(result: Any, what: str, root: str | None) -> int:
    from .client._changes import EXIT_CONFLICTS, restore_lines, undo_command

    undo = None
    if result.restore_checkpoint_id:
        undo = undo_command(result.restore_checkpoint_id, root)
    lines, refused = restore_lines(result, what, undo=undo)
    print("\n".join(lines))
    return EXIT_CONFLICTS if refused else 0
