"""The MCP client's literals and the wire's say the same thing.

``protocol`` may not import ``mcp`` (both stand on the core only), so the protocol
versions, statuses and transports are spelled in both; the daemon maps one to the other
by value. This pins them together: a version added on one side only fails here.
"""

from __future__ import annotations

from typing import get_args, get_type_hints

from cleveragents import mcp
from cleveragents.protocol import wire
from cleveragents.tool import ToolKind


def test_protocol_versions_statuses_and_trust_agree() -> None:
    assert get_args(wire.McpProtocol) == get_args(mcp.ProtocolVersion)
    assert get_args(wire.McpStatus) == get_args(mcp.Status)
    assert get_args(mcp.Trust) == get_args(ToolKind) == get_args(wire.McpTrust)


def test_status_entries_agree() -> None:
    hints = get_type_hints(wire.McpServerStatus)
    assert get_args(hints["transport"]) == get_args(mcp.Transport)
    assert get_args(hints["scope"]) == get_args(mcp.Scope)
