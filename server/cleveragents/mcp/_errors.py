"""The errors of the MCP client: one public class, two the package keeps to itself.

    ToolError (cleveragents.tool)
    └── McpToolError        a failed MCP call; its message is what the record's error shows
    McpStartError           a server that could not be started or connected (becomes ``error``)
    McpServerFault          a connected server broke one of our bounds (becomes ``error``)
    ConnectionLost          the connection ended under a call (the server died or hung up)

These three never leave :class:`~cleveragents.mcp.McpServer`: a failed start or a fault
becomes the server's status (``failed``), a lost connection becomes an ``McpToolError``
carrying the server's error and the tail of its stderr.
"""

from __future__ import annotations

from cleveragents.tool import ToolError


class McpToolError(ToolError):
    """A failed MCP tool call: the server said ``isError``, refused the call, timed out,
    or is down. ``str(error)`` is the text the record shows."""


class McpStartError(Exception):
    """Why a server could not be brought to ``ready``, in words for ``McpServer.error``."""


class McpServerFault(Exception):
    """A connected server broke a bound of ours (it flooded its tool list): the connection
    is dropped and ``str(fault)`` is the server's ``error``."""


class ConnectionLost(Exception):
    """The connection to the server ended while a call was waiting on it."""
