"""``builtin/file-write``: create or overwrite a UTF-8 text file, within ``max_write_bytes``.

:func:`write_args` is also the editor backend's
(:mod:`~cleveragents.workspace.file_backend`).
"""

from __future__ import annotations

import os

from cleveragents.tool import JSONValue, ToolAnnotations, ToolSpec

from ._errors import SandboxViolationError, WorkspaceToolError, show
from ._file_common import FILE_PATH, OUTPUT_PATH, object_schema, path_argument
from ._limits import WorkspaceLimits
from ._sandbox import given_root, hard_link_message, open_regular, resolve_path, sandbox_root


def file_write(inputs: dict[str, JSONValue], limits: WorkspaceLimits) -> dict[str, JSONValue]:
    """Create or overwrite a file with ``content``, creating parent directories."""
    root = sandbox_root(inputs)
    user_path, data = write_args(inputs, limits)
    real = resolve_path(given_root(inputs), user_path, for_write=True)
    shown = show(user_path)
    created = True
    try:
        fd, info = open_regular(
            root, real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, shown, create_parents=True
        )
    except FileExistsError:
        created = False
        fd, info = open_regular(root, real, os.O_WRONLY, shown)
    with os.fdopen(fd, "wb") as handle:
        # Checked on the descriptor: a link made after resolve_path is caught here.
        if info.st_nlink > 1:
            raise SandboxViolationError(hard_link_message(shown, info.st_nlink))
        handle.truncate(0)
        handle.write(data)
    return {"path": str(real), "bytes_written": len(data), "created": created}


def write_args(inputs: dict[str, JSONValue], limits: WorkspaceLimits) -> tuple[str, bytes]:
    """``file-write``'s path and content (encoded), checked against the write cap."""
    user_path = path_argument(inputs)
    content = inputs.get("content")
    if not isinstance(content, str):
        raise WorkspaceToolError("content must be a string")
    data = content.encode("utf-8", "surrogateescape")
    if len(data) > limits.max_write_bytes:
        raise WorkspaceToolError(
            f"content for {show(user_path)} is {len(data)} bytes; "
            f"the limit is {limits.max_write_bytes}"
        )
    return user_path, data


def write_spec(limits: WorkspaceLimits) -> ToolSpec:
    """``builtin/file-write`` bound to ``limits``."""
    return ToolSpec(
        validators_on_first_use=True,  # the project's own schema: compiled by a test
        name="builtin/file-write",
        description=(
            "Create or overwrite a UTF-8 text file with content, creating missing "
            "parent directories inside the sandbox root. The output's path is absolute."
        ),
        input_schema=object_schema(
            {"path": FILE_PATH, "content": {"type": "string"}}, ["path", "content"]
        ),
        output_schema=object_schema(
            {
                "path": OUTPUT_PATH,
                "bytes_written": {"type": "integer"},
                "created": {"type": "boolean"},
            },
            ["path", "bytes_written", "created"],
        ),
        handler=lambda inputs: file_write(inputs, limits),
        annotations=ToolAnnotations(destructive=True, idempotent=True),
        timeout_s=30.0,
    )
