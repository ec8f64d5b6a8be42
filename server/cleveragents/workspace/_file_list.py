"""``builtin/file-list``: entries beneath ``path`` whose path matches a glob.

The walk (:class:`~cleveragents.workspace._walk.Walk`) goes by descriptor beneath the
run's pinned root, never follows a symlink, skips ``.git`` and ``.gitignore``d entries,
and runs in a stoppable worker (:mod:`~cleveragents.workspace._stop`).
"""

from __future__ import annotations

import os

from cleveragents.tool import JSONValue, ToolAnnotations, ToolSpec

from ._errors import WorkspaceToolError, show
from ._file_common import PATH_DOC, base_dir, check_literal_prefix, join_notes, object_schema
from ._globs import Glob
from ._limits import WorkspaceLimits
from ._sandbox import check_pattern, sandbox_root
from ._stop import NEVER, WALK_TIMEOUT_S, StopFlag, stoppable
from ._walk import Walk


def file_list(
    inputs: dict[str, JSONValue], limits: WorkspaceLimits, stop: StopFlag = NEVER
) -> dict[str, JSONValue]:
    """List entries beneath ``path`` matching ``pattern``; directories end with ``/``."""
    root = sandbox_root(inputs)
    raw_pattern = inputs.get("pattern", "*")
    if not isinstance(raw_pattern, str):
        raise WorkspaceToolError("pattern must be a string")
    pattern = check_pattern(root, raw_pattern)
    base = base_dir(root, inputs, os.path.isabs(raw_pattern))
    shown_base = show(str(inputs.get("path", ".")))
    if not base.exists():
        raise WorkspaceToolError(f"path {shown_base} does not exist")
    if not base.is_dir():
        raise WorkspaceToolError(f"path {shown_base} is not a directory")
    check_literal_prefix(root, base, pattern, raw_pattern, "pattern")
    glob = Glob.parse(pattern, "pattern")
    walk = Walk(
        root,
        str(base),
        limits.max_walk_entries,
        glob.max_depth,
        depth_cap=limits.max_walk_depth,
        stop=stop.check,
    )
    entries: list[JSONValue] = []
    truncated = False
    for entry in walk:
        stop.check()
        if glob.matches(entry.rel_base, entry.is_dir):
            if len(entries) >= limits.max_list_results:
                truncated = True
                break
            entries.append(entry.real + "/" if entry.is_dir else entry.real)
    cut = truncated or walk.exhausted or walk.depth_capped
    output: dict[str, JSONValue] = {"entries": entries, "truncated": cut}
    note = join_notes(_cap_note(truncated, walk.exhausted, limits), walk.note())
    if note is not None:
        output["note"] = note
    return output


def _cap_note(truncated: bool, exhausted: bool, limits: WorkspaceLimits) -> str | None:
    """What the note says of a cap hit: the entries returned, or the entries walked."""
    if truncated:
        return (
            f"only the first {limits.max_list_results} entries are shown; "
            "narrow the pattern or the path"
        )
    if exhausted:
        return (
            f"the walk stopped after {limits.max_walk_entries} directory entries; "
            "narrow the pattern or the path"
        )
    return None


def list_spec(limits: WorkspaceLimits) -> ToolSpec:
    """``builtin/file-list`` bound to ``limits``."""
    return ToolSpec(
        validators_on_first_use=True,  # the project's own schema: compiled by a test
        name="builtin/file-list",
        description=(
            "List files and directories beneath path (default: the sandbox root) "
            "whose path relative to it matches the glob pattern (default '*': the "
            "direct children). '**' matches any depth ('**/*.py'); a trailing '/' "
            "lists directories only. Symlinks are not followed, .git and "
            ".gitignored entries are skipped. Entries are absolute paths, "
            f"directories end with '/'; at most {limits.max_list_results} are returned."
        ),
        input_schema=object_schema(
            {
                "pattern": {"type": "string", "minLength": 1, "default": "*"},
                "path": {"type": "string", "minLength": 1, "description": PATH_DOC},
            },
            [],
        ),
        output_schema=object_schema(
            {
                "entries": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Absolute paths inside the sandbox root; "
                    "directories end with '/'.",
                },
                "truncated": {"type": "boolean"},
                "note": {"type": "string"},
            },
            ["entries", "truncated"],
        ),
        handler=stoppable("file-list", file_list, limits),
        annotations=ToolAnnotations(read_only=True, idempotent=True),
        timeout_s=WALK_TIMEOUT_S,
    )
