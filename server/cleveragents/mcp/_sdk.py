"""Whether the optional ``mcp`` SDK is there, and loading the code that needs it.

``import cleveragents.mcp`` must stay cheap and work without the SDK, so nothing here
imports it: :func:`mcp_available` only looks for it, and :func:`load_connection` imports
the SDK-backed module in a worker thread (the SDK takes about half a second to import,
which must not stall the daemon's event loop).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # a connection's types: loaded with the server, after start-up
    from ._link import RunConnection

SDK_MISSING = "the MCP SDK is not installed: pip install 'cleveragents[mcp]'"


def mcp_available() -> bool:
    """Whether the ``mcp`` SDK can be imported (looked up, not imported)."""
    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):  # ValueError: ``sys.modules["mcp"]`` is None
        return False


async def load_connection() -> RunConnection:
    """``cleveragents.mcp._connection.run``, imported off the event loop the first time."""
    module = await asyncio.to_thread(importlib.import_module, "cleveragents.mcp._connection")
    return cast("RunConnection", module.run)
