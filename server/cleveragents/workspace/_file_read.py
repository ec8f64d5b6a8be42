"""``builtin/file-read``: lines of a UTF-8 text file, capped at ``max_read_bytes``.

:func:`read_args` and :func:`read_window` are also the editor backend's
(:mod:`~cleveragents.workspace.file_backend`): it checks the same arguments and shapes
the same output from the text an editor returns.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from cleveragents.tool import JSONValue, ToolAnnotations, ToolSpec

from ._errors import WorkspaceToolError, show
from ._file_common import BINARY_SNIFF_BYTES, FILE_PATH, OUTPUT_PATH, object_schema, path_argument
from ._limits import WorkspaceLimits
from ._sandbox import given_root, open_regular, resolve_path, sandbox_root

_CHUNK = 65536


def file_read(inputs: dict[str, JSONValue], limits: WorkspaceLimits) -> dict[str, JSONValue]:
    """Read lines ``start_line..end_line`` (1-based, inclusive) of a UTF-8 text file."""
    root = sandbox_root(inputs)
    user_path, start, end = read_args(inputs)
    real = resolve_path(given_root(inputs), user_path)
    shown = show(user_path)
    fd, _info = open_regular(root, real, os.O_RDONLY, shown)
    with os.fdopen(fd, "rb") as handle:
        if b"\x00" in handle.read(BINARY_SNIFF_BYTES):
            raise WorkspaceToolError(f"file {shown} looks binary (it contains NUL bytes)")
        handle.seek(0)
        return read_window(handle, real, shown, start, end, limits)


def read_args(inputs: dict[str, JSONValue]) -> tuple[str, int, int | None]:
    """``file-read``'s path, ``start_line`` and ``end_line``, checked."""
    user_path = path_argument(inputs)
    start = inputs.get("start_line") or 1
    end = inputs.get("end_line")
    if not isinstance(start, int) or (end is not None and not isinstance(end, int)):
        raise WorkspaceToolError("start_line and end_line must be integers")
    if end is not None and end < start:
        raise WorkspaceToolError(f"end_line {end} is before start_line {start}")
    return user_path, start, end


def read_window(
    handle: BinaryIO,
    real: Path,
    shown: str,
    start: int,
    end: int | None,
    limits: WorkspaceLimits,
    *,
    first_line: int = 1,
    window: bool = False,
) -> dict[str, JSONValue]:
    """``file-read``'s output from ``handle``, whose first line is line ``first_line``
    of the file. ``window``: ``handle`` holds only the lines an editor returned for
    ``start..end``, so the file's length is known only when it gave fewer than asked."""
    lines: list[str] = []
    size = 0
    truncated = False
    stopped_early = window and end is not None
    cut_line: int | None = None
    line_no = first_line - 1
    last = start - 1
    for raw in _bounded_lines(handle, limits.max_read_bytes + 1):
        line_no += 1
        if line_no < start:
            continue
        if end is not None and line_no > end:
            stopped_early = True
            break
        if size + len(raw) > limits.max_read_bytes:
            truncated = stopped_early = True
            if not lines:  # one line over the cap: return its start, never nothing
                head = raw[: limits.max_read_bytes]
                lines.append(_decode_line(head, shown, line_no, cut=True))
                cut_line = last = line_no
            break
        lines.append(_decode_line(raw, shown, line_no))
        size += len(raw)
        last = line_no
    if window and end is not None and line_no < end and not truncated:
        stopped_early = False  # the editor gave fewer lines than asked: that is the end
    if line_no < start and not (start == 1 and line_no == 0):
        if window:
            raise WorkspaceToolError(f"start_line {start} is past the end of {shown}")
        raise WorkspaceToolError(f"start_line {start} is past the end of {shown} ({line_no} lines)")
    output: dict[str, JSONValue] = {
        "path": str(real),
        "content": "".join(lines),
        "start_line": start,
        "end_line": last,
        "total_lines": None if stopped_early else line_no,
        "truncated": truncated,
    }
    if truncated:
        what = f"line {cut_line} was cut at" if cut_line is not None else "output truncated at"
        output["note"] = (
            f"{what} {limits.max_read_bytes} bytes (the read cap); "
            f"read again with start_line={last + 1} to continue"
        )
    return output


def _bounded_lines(handle: BinaryIO, limit: int) -> Iterator[bytes]:
    """Each line of ``handle``, at most ``limit`` bytes of it (the rest is read and dropped).

    Keeps a minified one-line file from being loaded whole just to be cut.
    """
    while raw := handle.readline(limit):
        if len(raw) == limit and not raw.endswith(b"\n"):
            while (rest := handle.readline(_CHUNK)) and not rest.endswith(b"\n"):
                pass
        yield raw


def _decode_line(raw: bytes, shown: str, line_no: int, *, cut: bool = False) -> str:
    """Decode one line strictly; with ``cut``, a character split by the cut is dropped."""
    if b"\x00" in raw:
        raise WorkspaceToolError(f"file {shown} looks binary (NUL byte on line {line_no})")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(raw) - 3 and exc.end == len(raw):
            return raw[: exc.start].decode("utf-8")
        raise WorkspaceToolError(
            f"file {shown} is not UTF-8 text (invalid byte on line {line_no})"
        ) from None


def read_spec(limits: WorkspaceLimits) -> ToolSpec:
    """``builtin/file-read`` bound to ``limits``."""
    return ToolSpec(
        validators_on_first_use=True,  # the project's own schema: compiled by a test
        name="builtin/file-read",
        description=(
            "Read a UTF-8 text file, optionally only lines start_line..end_line "
            f"(1-based, inclusive). At most {limits.max_read_bytes} bytes are returned; "
            "a longer result is truncated and says where to continue. The output's "
            "path is absolute."
        ),
        input_schema=object_schema(
            {
                "path": FILE_PATH,
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
            },
            ["path"],
        ),
        output_schema=object_schema(
            {
                "path": OUTPUT_PATH,
                "content": {"type": "string"},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"},
                "total_lines": {"type": ["integer", "null"]},
                "truncated": {"type": "boolean"},
                "note": {"type": "string"},
            },
            ["path", "content", "start_line", "end_line", "total_lines", "truncated"],
        ),
        handler=lambda inputs: file_read(inputs, limits),
        annotations=ToolAnnotations(read_only=True, idempotent=True),
        timeout_s=30.0,
    )
