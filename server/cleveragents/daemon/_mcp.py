"""MCP servers on the LSP wire: their statuses as ``mcp/servers`` reports them, and the
``tools/changed`` notification of a server whose tools changed."""

from __future__ import annotations

from collections.abc import Callable

from ..protocol import dumps, unstructure, wire
from ..protocol import methods as m
from ..rpc import Peer
from ..runs import McpServerState


def status_wire(state: McpServerState) -> wire.McpServerStatus:
    return wire.McpServerStatus(
        state.name, state.scope, state.transport, state.status,  # type: ignore[arg-type]
        state.tool_count, state.protocol_version, state.error, state.stderr_tail,
    )  # fmt: skip


def tools_changed(peer: Peer) -> Callable[[str], None]:
    """The ``tools/changed`` notification of one server's tools, for an editor's view."""

    def notify(server: str) -> None:
        peer.notify_json(
            m.TOOLS_CHANGED, dumps(unstructure(wire.ToolsChangedNotification("mcp", server)))
        )

    return notify
