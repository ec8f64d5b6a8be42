"""The editor's file system: ``fs/read_text_file`` and ``fs/write_text_file``.

When the client advertised ``fs.readTextFile`` / ``fs.writeTextFile`` in ``initialize``,
a session's ``file-read`` / ``file-write`` and ``file-edit`` end in a request to the
client instead of the disk (:mod:`cleveragents.workspace.file_backend`: the path has
already been resolved and confined by the sandbox when a request is sent), so the
editor's buffers are read and its review panel sees every edit. ``file-list``,
``file-search`` and the shell stay on disk.

It also remembers the last text it read or wrote for each path (a few, the latest
kept), because the disk no longer shows an edit: the diff of a ``tool_call`` is taken
from here.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol import RpcError
from ..tool import ToolSpec
from ..workspace import WorkspaceToolError
from ..workspace.file_backend import FileBackend, routed_file_tools

if TYPE_CHECKING:
    from ._rpc import AcpDispatcher

READ_METHOD = "fs/read_text_file"
WRITE_METHOD = "fs/write_text_file"
_KEPT = 32
"""Texts remembered for diffs (the most recently used paths)."""
_KEPT_BYTES = 8 * 1024 * 1024
"""Longer texts are not remembered (their tool call shows its text output instead)."""


class EditorFiles:
    """One session's routing of file reads and writes to the client."""

    def __init__(self, rpc: AcpDispatcher, session_id: str, fs: dict[str, Any]) -> None:
        self._rpc = rpc
        self._session_id = session_id
        self.reads = fs.get("readTextFile") is True
        self.writes = fs.get("writeTextFile") is True
        self._texts: OrderedDict[str, str] = OrderedDict()

    @property
    def active(self) -> bool:
        return self.reads or self.writes

    def backend(self) -> FileBackend:
        return FileBackend(
            read_text=self.read_text if self.reads else None,
            write_text=self.write_text if self.writes else None,
        )

    def tools(self, builtin_tools: list[ToolSpec]) -> list[ToolSpec]:
        """``builtin_tools`` with the file tools routed here (the rest as they are)."""
        if not self.active:
            return builtin_tools
        routed = {spec.name: spec for spec in routed_file_tools(self.backend())}
        return [routed.get(spec.name, spec) for spec in builtin_tools]

    def known(self, path: str) -> str | None:
        """The last text read from or written to the editor for ``path``, if kept."""
        return self._texts.get(path)

    def _keep(self, path: str, text: str) -> None:
        self._texts.pop(path, None)
        if len(text) <= _KEPT_BYTES:
            self._texts[path] = text
            while len(self._texts) > _KEPT:
                self._texts.popitem(last=False)

    async def read_text(self, path: Path, line: int | None, limit: int | None) -> str:
        params: dict[str, Any] = {"sessionId": self._session_id, "path": str(path)}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        reply = await self._request(READ_METHOD, params, path)
        content = reply.get("content") if isinstance(reply, dict) else None
        if not isinstance(content, str):
            raise WorkspaceToolError(f"the editor's answer to reading {path} has no text")
        if line is None and limit is None:
            self._keep(str(path), content)
        return content

    async def write_text(self, path: Path, content: str) -> None:
        params = {"sessionId": self._session_id, "path": str(path), "content": content}
        await self._request(WRITE_METHOD, params, path)
        self._keep(str(path), content)

    async def _request(self, method: str, params: dict[str, Any], path: Path) -> Any:
        msg_id, future = self._rpc.request(method, params)
        try:
            return await future
        except asyncio.CancelledError:  # the run was cancelled or the tool timed out
            self._rpc.cancel_request(msg_id)
            raise
        except RpcError as exc:
            verb = "read" if method == READ_METHOD else "write"
            raise WorkspaceToolError(
                f"the editor could not {verb} {path}: {exc.message} (code {exc.code})"
            ) from None
