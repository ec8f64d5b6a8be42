"""Where ``file-read``, ``file-write`` and ``file-edit`` do their final read or write.

By default, the disk (:mod:`~cleveragents.workspace.files`). An editor that keeps its
own buffers (ACP's ``fs/read_text_file`` and ``fs/write_text_file``) can take the
final step instead: :func:`routed_file_tools` gives the same three tools, with the same
schemas, argument checks, sandbox confinement and size caps, whose last step is a
:class:`FileBackend` call. Everything before it is unchanged: the path is resolved and
confined by :func:`~cleveragents.workspace._sandbox.resolve_path`, and an existing file
is opened beneath the root and checked (regular, not hard-linked for a write) exactly as
the disk tools do, before the backend is asked anything.

This module knows the backend only as two optional async callables; it knows nothing
of ACP, JSON-RPC or sessions. A write through the backend creates no directory and
touches nothing on disk: the editor does the writing.
"""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs

from cleveragents.tool import JSONValue, ToolSpec

from ._errors import SandboxViolationError, WorkspaceToolError, show
from ._file_edit import apply_edit, check_edit_size, edit_args, read_edit_text
from ._file_read import read_args, read_window
from ._file_write import write_args
from ._limits import WorkspaceLimits
from ._sandbox import given_root, hard_link_message, open_regular, resolve_path, sandbox_root
from .files import file_tools

ReadText = Callable[[Path, int | None, int | None], Awaitable[str]]
"""``(real path, first line or None, line count or None) -> text``."""
WriteText = Callable[[Path, str], Awaitable[None]]
"""``(real path, the file's whole new text)``."""


@attrs.frozen
class FileBackend:
    """The final read and write of the file tools; ``None`` keeps that step on disk."""

    read_text: ReadText | None = None
    write_text: WriteText | None = None


def routed_file_tools(
    backend: FileBackend, limits: WorkspaceLimits | None = None
) -> list[ToolSpec]:
    """The five file tools, with read, write and edit ending in ``backend`` where it
    takes that step (list and search always walk the disk)."""
    lim = limits or WorkspaceLimits()
    tools = []
    for spec in file_tools(lim):
        handler = None
        if spec.name == "builtin/file-read" and backend.read_text is not None:
            handler = _reader(backend.read_text, lim)
        elif spec.name == "builtin/file-write" and backend.write_text is not None:
            handler = _writer(backend.write_text, lim)
        elif spec.name == "builtin/file-edit" and backend.write_text is not None:
            handler = _editor(backend, lim)
        tools.append(spec if handler is None else attrs.evolve(spec, handler=handler))
    return tools


Handler = Callable[[dict[str, JSONValue]], Awaitable[dict[str, JSONValue]]]


def _existing(root: str, real: Path, shown: str, *, for_write: bool) -> os.stat_result | None:
    """The checks the disk tools make on the descriptor, for a file that exists; None
    when it does not (yet) exist on disk."""
    try:
        fd, info = open_regular(root, real, os.O_RDONLY, shown)
    except WorkspaceToolError:
        if not os.path.lexists(real):
            return None
        raise
    os.close(fd)
    if for_write and info.st_nlink > 1:
        raise SandboxViolationError(hard_link_message(shown, info.st_nlink))
    return info


def _reader(read_text: ReadText, limits: WorkspaceLimits) -> Handler:
    async def handler(inputs: dict[str, JSONValue]) -> dict[str, JSONValue]:
        def confine() -> tuple[Path, str, int, int | None]:
            root = sandbox_root(inputs)
            user_path, start, end = read_args(inputs)
            real = resolve_path(given_root(inputs), user_path)
            shown = show(user_path)
            _existing(root, real, shown, for_write=False)  # an unsaved new buffer may not be
            return real, shown, start, end

        real, shown, start, end = await asyncio.to_thread(confine)
        count = None if end is None else end - start + 1
        text = await read_text(real, start if start > 1 else None, count)
        data = text.encode("utf-8", "surrogatepass")
        if b"\x00" in data:
            raise WorkspaceToolError(f"file {shown} looks binary (it contains NUL bytes)")
        return read_window(
            io.BytesIO(data), real, shown, start, end, limits, first_line=start, window=True
        )

    return handler


def _writer(write_text: WriteText, limits: WorkspaceLimits) -> Handler:
    async def handler(inputs: dict[str, JSONValue]) -> dict[str, JSONValue]:
        def confine() -> tuple[Path, bytes, bool]:
            root = sandbox_root(inputs)
            user_path, data = write_args(inputs, limits)
            real = resolve_path(given_root(inputs), user_path, for_write=True)
            created = _existing(root, real, show(user_path), for_write=True) is None
            return real, data, created

        real, data, created = await asyncio.to_thread(confine)
        content = inputs["content"]
        assert isinstance(content, str)  # write_args checked it
        await write_text(real, content)
        return {"path": str(real), "bytes_written": len(data), "created": created}

    return handler


def _editor(backend: FileBackend, limits: WorkspaceLimits) -> Handler:
    write_text = backend.write_text
    assert write_text is not None

    async def handler(inputs: dict[str, JSONValue]) -> dict[str, JSONValue]:
        def confine() -> tuple[Path, str, str, str, bool, str | None]:
            root = sandbox_root(inputs)
            user_path, old, new, replace_all = edit_args(inputs)
            real = resolve_path(given_root(inputs), user_path, for_write=True)
            shown = show(user_path)
            text = None
            if backend.read_text is None:
                fd, info = open_regular(root, real, os.O_RDONLY, shown)
                with os.fdopen(fd, "rb") as handle:
                    text = read_edit_text(handle, info, shown, limits)
            else:
                _existing(root, real, shown, for_write=True)
            return real, shown, old, new, replace_all, text

        real, shown, old, new, replace_all, text = await asyncio.to_thread(confine)
        if text is None:
            assert backend.read_text is not None
            text = await backend.read_text(real, None, None)
        size = len(text.encode("utf-8", "surrogatepass"))
        check_edit_size(shown, size, limits)
        if "\x00" in text:
            raise WorkspaceToolError(f"file {shown} looks binary (it contains NUL bytes)")
        updated, replacements = apply_edit(
            text, size, old, new, replace_all=replace_all, shown=shown, limits=limits
        )
        await write_text(real, updated)
        return {"path": str(real), "replacements": replacements}

    return handler
