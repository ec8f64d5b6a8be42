"""``builtin/file-edit``: replace exact text in a file, bounded by the size of the result.

The result's size is computed before it is built (``docs/security.md`` §2.3), so an edit
repeated, or one ``replace_all`` over many hits, cannot grow a file past the write cap.
:func:`edit_args`, :func:`read_edit_text`, :func:`check_edit_size` and :func:`apply_edit`
are also the editor backend's (:mod:`~cleveragents.workspace.file_backend`).
"""

from __future__ import annotations

import os
from typing import BinaryIO

from cleveragents.tool import JSONValue, ToolAnnotations, ToolSpec

from ._errors import SandboxViolationError, WorkspaceToolError, show
from ._file_common import FILE_PATH, OUTPUT_PATH, decode_text, object_schema, path_argument
from ._limits import WorkspaceLimits
from ._sandbox import given_root, hard_link_message, open_regular, resolve_path, sandbox_root


def file_edit(inputs: dict[str, JSONValue], limits: WorkspaceLimits) -> dict[str, JSONValue]:
    """Replace the exact text ``old_text`` with ``new_text`` (once, or every time)."""
    root = sandbox_root(inputs)
    user_path, old, new, replace_all = edit_args(inputs)
    real = resolve_path(given_root(inputs), user_path, for_write=True)
    shown = show(user_path)
    fd, info = open_regular(root, real, os.O_RDWR, shown)
    with os.fdopen(fd, "r+b") as handle:
        text = read_edit_text(handle, info, shown, limits)
        updated, replacements = apply_edit(
            text, info.st_size, old, new, replace_all=replace_all, shown=shown, limits=limits
        )
        handle.seek(0)
        handle.truncate(0)
        handle.write(updated.encode("utf-8"))
    return {"path": str(real), "replacements": replacements}


def read_edit_text(
    handle: BinaryIO, info: os.stat_result, shown: str, limits: WorkspaceLimits
) -> str:
    """The text of a file about to be edited, from its open ``handle``: refused when it
    has other hard links (an edit would reach a file outside the root) or is too big."""
    if info.st_nlink > 1:
        raise SandboxViolationError(hard_link_message(shown, info.st_nlink))
    check_edit_size(shown, info.st_size, limits)
    return decode_text(handle.read(), shown)


def edit_args(inputs: dict[str, JSONValue]) -> tuple[str, str, str, bool]:
    """``file-edit``'s path, ``old_text``, ``new_text`` and ``replace_all``, checked."""
    user_path = path_argument(inputs)
    old = inputs.get("old_text")
    new = inputs.get("new_text")
    replace_all = bool(inputs.get("replace_all", False))
    if not isinstance(old, str) or not isinstance(new, str):
        raise WorkspaceToolError("old_text and new_text must be strings")
    if old == "":
        raise WorkspaceToolError("old_text is empty; use builtin/file-write to write a file")
    if old == new:
        raise WorkspaceToolError("old_text and new_text are identical; nothing to change")
    return user_path, old, new, replace_all


def check_edit_size(shown: str, size: int, limits: WorkspaceLimits) -> None:
    if size > limits.max_write_bytes:
        raise WorkspaceToolError(
            f"file {shown} is {size} bytes; the edit limit is {limits.max_write_bytes}"
        )


def apply_edit(
    text: str,
    size: int,
    old: str,
    new: str,
    *,
    replace_all: bool,
    shown: str,
    limits: WorkspaceLimits,
) -> tuple[str, int]:
    """``text`` (``size`` bytes) with ``old`` replaced by ``new``, and the replacements."""
    count = text.count(old)
    if count == 0:
        raise WorkspaceToolError(f"old_text was not found in {shown}")
    if count > 1 and not replace_all:
        raise WorkspaceToolError(
            f"old_text occurs {count} times in {shown}; include more surrounding text "
            "to make it unique, or pass replace_all=true"
        )
    replacements = count if replace_all else 1
    # The result's size is known before it is built: a small edit repeated (or one
    # replace_all over many hits) must not grow a file past the write cap, nor build
    # a huge string in memory first.
    delta = len(new.encode("utf-8", "surrogatepass")) - len(old.encode("utf-8"))
    result_bytes = size + replacements * delta
    if result_bytes > limits.max_write_bytes:
        raise WorkspaceToolError(
            f"editing {shown} would make it {result_bytes} bytes ({replacements} "
            f"replacement(s)); the write limit is {limits.max_write_bytes}; "
            "the file is unchanged"
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return updated, replacements


def edit_spec(limits: WorkspaceLimits) -> ToolSpec:
    """``builtin/file-edit`` bound to ``limits``."""
    return ToolSpec(
        validators_on_first_use=True,  # the project's own schema: compiled by a test
        name="builtin/file-edit",
        description=(
            "Replace the exact text old_text with new_text in a file. old_text must "
            "occur exactly once unless replace_all is true. Whitespace and line "
            "endings must match exactly. The output's path is absolute."
        ),
        input_schema=object_schema(
            {
                "path": FILE_PATH,
                "old_text": {"type": "string", "minLength": 1},
                "new_text": {"type": "string"},
                "replace_all": {"type": "boolean", "default": False},
            },
            ["path", "old_text", "new_text"],
        ),
        output_schema=object_schema(
            {"path": OUTPUT_PATH, "replacements": {"type": "integer"}},
            ["path", "replacements"],
        ),
        handler=lambda inputs: file_edit(inputs, limits),
        annotations=ToolAnnotations(destructive=True),
        timeout_s=30.0,
    )
