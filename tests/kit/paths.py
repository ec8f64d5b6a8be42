"""Where things are in the repository, for tests that start a script or read a package."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MCP_SERVERS = ROOT / "tests" / "mcp" / "servers"
SDK_SERVER = MCP_SERVERS / "sdk_server.py"
"""The MCP test server built on the SDK (stdio, or ``--http PORT``)."""
PLAIN_SERVER = MCP_SERVERS / "plain_server.py"
"""The MCP test server written by hand, for what the SDK would not send."""
TS_PACKAGE = ROOT / "client-protocol" / "typescript"
