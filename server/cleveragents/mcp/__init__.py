"""MCP servers as tool sources: the client core.

Owns connecting to MCP servers (stdio and streamable HTTP, protocol versions 2025-11-25
and 2026-07-28), their status, their stderr logs, their tools as ``ToolSpec``s named
``mcp:SERVER/TOOL``, calls with timeouts and cancellation, restarts and list changes.

It stands on :mod:`cleveragents.tool` only. It knows nothing of the daemon, the wire
types or where entries come from: the daemon builds a :class:`McpServerConfig` per
entry, an :class:`McpServer` per server, and registers ``tool_specs()``. What a server
asks of its client (elicitation, roots) and tells it (progress, log messages) goes to
the :class:`ClientHooks` its owner lends it (``_hooks``).

The ``mcp`` SDK is an optional extra (``cleveragents[mcp]``), imported only when a
server starts; :func:`mcp_available` says whether it is installed, and a server started
without it fails with :data:`SDK_MISSING` as its error.
"""

from __future__ import annotations

import typing

from ..tool._lazy import lazy_exports as _lazy_exports
from ._config import (
    SERVER_NAME_PATTERN,
    IdentityProviderConfig,
    McpConfigError,
    McpServerConfig,
    OAuthConfig,
    ProtocolVersion,
    Transport,
    Trust,
    idp_secret_variable,
    secret_variable,
)
from ._errors import McpToolError
from ._hooks import (
    NO_HOOKS,
    ClientHooks,
    ElicitAction,
    Elicitation,
    ElicitationAnswer,
    ElicitMode,
    Sampling,
    SamplingAnswer,
    SamplingRefused,
)
from ._sdk import SDK_MISSING, mcp_available
from ._tokens import TokenStore

if typing.TYPE_CHECKING:
    from ._server import RESTARTS_PER_MINUTE, McpServer, Scope, Status

_LAZY = {"RESTARTS_PER_MINUTE", "McpServer", "Scope", "Status"}
"""The server and what it stands on (its connection, tools and log modules) load when
first named: the daemon reads entries and checks the SDK before its ``initialize``
reply, and starts a server only after it."""


__getattr__ = _lazy_exports(__name__, dict.fromkeys(_LAZY, "_server"), globals())


__all__ = [
    "NO_HOOKS",
    "RESTARTS_PER_MINUTE",
    "SDK_MISSING",
    "SERVER_NAME_PATTERN",
    "ClientHooks",
    "ElicitAction",
    "ElicitMode",
    "Elicitation",
    "ElicitationAnswer",
    "IdentityProviderConfig",
    "McpConfigError",
    "McpServer",
    "McpServerConfig",
    "McpToolError",
    "OAuthConfig",
    "ProtocolVersion",
    "Sampling",
    "SamplingAnswer",
    "SamplingRefused",
    "Scope",
    "Status",
    "TokenStore",
    "Transport",
    "Trust",
    "idp_secret_variable",
    "mcp_available",
    "secret_variable",
]
