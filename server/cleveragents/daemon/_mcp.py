"""MCP servers on the LSP wire: their statuses as ``mcp/servers`` reports them, the
``tools/changed`` notification of a server whose tools changed, and the sign-in URL of a
server that needs authorization, opened by the client (LSP ``window/showDocument``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol import dumps, unstructure, wire
from ..protocol import methods as m
from ..rpc import Peer
from ..runs import McpServerState

if TYPE_CHECKING:
    from ..mcp import McpServer

logger = logging.getLogger("cleveragents.daemon")

SHOW_DOCUMENT = "window/showDocument"
"""LSP's request to open a URI; ``external: true`` opens it in the system's browser."""


def status_wire(state: McpServerState) -> wire.McpServerStatus:
    return wire.McpServerStatus(
        state.name, state.scope, state.transport, state.status,  # type: ignore[arg-type]
        state.tool_count, state.protocol_version, state.error, state.stderr_tail,
        state.authorization_url,
    )  # fmt: skip


def tools_changed(peer: Peer) -> Callable[[str], None]:
    """The ``tools/changed`` notification of one server's tools, for an editor's view."""

    def notify(server: str) -> None:
        peer.notify_json(
            m.TOOLS_CHANGED, dumps(unstructure(wire.ToolsChangedNotification("mcp", server)))
        )

    return notify


def show_document(peer: Peer, supported: Callable[[], bool]) -> Callable[[McpServer], None]:
    """Ask the client to open a server's sign-in URL in the browser, when the client said
    it can (``capabilities.window.showDocument.support``); otherwise the URL is only in
    ``mcp/servers`` (``needsAuth``, ``authorizationUrl``)."""

    def open_url(server: McpServer) -> None:
        url = server.authorization_url
        if url is None or not supported():
            return
        _id, answer = peer.request(SHOW_DOCUMENT, {"uri": url, "external": True})
        answer.add_done_callback(_report(server.config.name))

    return open_url


def _report(name: str) -> Callable[[asyncio.Future[Any]], None]:
    def done(answer: asyncio.Future[Any]) -> None:
        if answer.cancelled():
            return
        failure = answer.exception()
        result = None if failure is not None else answer.result()
        if failure is not None or not (isinstance(result, dict) and result.get("success")):
            logger.info(
                "MCP server %s: the client did not open the sign-in page; its URL is in "
                "mcp/servers",
                name,
            )

    return done
