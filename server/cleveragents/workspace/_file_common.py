"""What the five file tools share: argument and text helpers, schema parts, and the
checks of ``path`` and patterns that ``file-list`` and ``file-search`` both make.

Each tool lives in its own module (``_file_read`` ... ``_file_search``);
:mod:`~cleveragents.workspace.files` assembles them. This module knows no tool by name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from cleveragents.tool import JSONValue

from ._errors import SandboxViolationError, WorkspaceToolError, show
from ._sandbox import is_within, resolve_path

BINARY_SNIFF_BYTES = 8192
"""A file with a NUL byte in its first 8 KiB is taken for binary."""

PATH_DOC = "relative to the sandbox root, or absolute inside it"
OUTPUT_PATH = {"type": "string", "description": "Absolute path inside the sandbox root."}
FILE_PATH = {"type": "string", "minLength": 1, "description": f"File path, {PATH_DOC}."}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, JSONValue]:
    """A strict object schema: the model's unknown arguments are refused, not ignored."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def path_argument(inputs: dict[str, JSONValue], key: str = "path") -> str:
    """The path argument ``key``, as the model gave it."""
    value = inputs.get(key)
    if not isinstance(value, str):
        raise WorkspaceToolError(f"{key} must be a string")
    return value


def decode_text(data: bytes, shown: str) -> str:
    """A whole file's text, strictly UTF-8; a file that looks binary is refused."""
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise WorkspaceToolError(f"file {shown} looks binary (it contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkspaceToolError(
            f"file {shown} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None


def base_dir(root: str, inputs: dict[str, JSONValue], pattern_was_absolute: bool) -> Path:
    """Where a list or search starts: ``path`` resolved, or the root. An absolute pattern
    is already relative to the root, so it takes no ``path``."""
    raw = inputs.get("path")
    if raw is None:
        return Path(root)
    if not isinstance(raw, str):
        raise WorkspaceToolError("path must be a string")
    if pattern_was_absolute:
        raise WorkspaceToolError(
            "an absolute pattern is taken relative to the sandbox root; omit path"
        )
    return resolve_path(root, raw)


_GLOB_CHARS = re.compile(r"[*?\[]")


def check_literal_prefix(root: str, base: Path, pattern: str, raw: str, what: str) -> None:
    """Refuse a pattern whose fixed leading directories pass through a symlink outside.

    The walk would never follow such a link, so the pattern would just match nothing;
    the contract (``docs/security.md`` §2) wants a pattern reaching outside refused,
    not filtered.
    """
    literal: list[str] = []
    for segment in pattern.split("/"):
        if _GLOB_CHARS.search(segment):
            break
        if segment not in ("", "."):
            literal.append(segment)
    if not literal:
        return
    if not is_within(os.path.realpath(os.path.join(base, *literal)), root):
        raise SandboxViolationError(
            f"{what} {show(raw)} reaches outside the sandbox root through the symlink "
            f"{show('/'.join(literal))}"
        )


def join_notes(*notes: str | None) -> str | None:
    """The notes given, joined into one, or ``None`` when there are none."""
    present = [note for note in notes if note]
    return "; ".join(present) if present else None
