"""What the run service answers for its MCP servers (``cleveragents.mcp.ClientHooks``):
a call's progress becomes the run's ``ToolCallProgress`` event, an elicitation goes to
the face's user with the run it is about, and the roots are the workspace folders.

A face lends what only it can do as an ``McpClientSide``: how to ask its user
(``elicit``; without it every elicitation is declined) and the folders of the moment
(``roots``; default the settings' workspace folders). The run a server request is about
is the one whose tool call was in flight on that connection, found by the call's cancel
token (a shared server's tools are called from any run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from ..mcp import ClientHooks, Elicitation, ElicitationAnswer
from ..tool import ToolCallContext, ToolCallProgress

if TYPE_CHECKING:
    from ._run import Run
    from ._service import RunService

__all__ = ["Elicit", "Elicitation", "ElicitationAnswer", "McpClientSide", "ServiceHooks"]

Elicit = Callable[[str | None, Elicitation], Awaitable[ElicitationAnswer]]
"""``elicit(run_id, request)``: ask the user (``run_id`` ``None`` outside a run)."""


@attrs.frozen(kw_only=True)
class McpClientSide:
    """What a face lends the MCP servers of its service."""

    elicit: Elicit | None = None
    """Asks the user; ``None``: every elicitation is declined."""
    roots: Callable[[], Sequence[str]] | None = None
    """The workspace folders now (absolute paths); default the settings'."""


class ServiceHooks(ClientHooks):
    """The run service's answers to its MCP servers (see the module docstring)."""

    def __init__(
        self,
        service: RunService,
        side: McpClientSide,
        roots: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        self._service = service
        self._side = side
        self._roots = roots if roots is not None else side.roots

    def _run(self, call: ToolCallContext | None) -> Run | None:
        if call is None:
            return None
        for run in self._service.active.values():
            if run.cancel is call.cancel:
                return run
        return None

    def roots(self) -> list[str]:
        roots = self._roots
        return list(roots() if roots is not None else self._service.settings.workspace_folders)

    def progress(
        self, call: ToolCallContext, progress: float, total: float | None, message: str | None
    ) -> None:
        run = self._run(call)
        if run is not None:
            run.on_event(ToolCallProgress(call.call_id, progress, total, message))

    async def elicit(self, call: ToolCallContext | None, request: Elicitation) -> ElicitationAnswer:
        elicit = self._side.elicit
        if elicit is None:
            return ElicitationAnswer("decline")
        run = self._run(call)
        return await elicit(run.run_id if run is not None else None, request)
