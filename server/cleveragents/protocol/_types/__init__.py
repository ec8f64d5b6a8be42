"""Wire types of protocol v1, each defined once as an attrs class; this package is their
one namespace (``from cleveragents.protocol import wire``).

Field names are snake_case here and camelCase on the wire (the converter renames).
Fields marked ``OPTIONAL`` are left out of a message when they are ``None``; every other
field is always sent, including ``0``, ``False`` and ``null``. A field's docstring is its
meaning: the JSON Schema document, the TypeScript types and the field tables of
``client-protocol/PROTOCOL.md`` are generated from these classes.

One module per concern: ``_lifecycle`` (``initialize``), ``_tools`` (tool definitions,
``tools/*``, ``permission/request``), ``_runs`` (``run/*`` and a run's notifications),
``_mcp`` (``mcp/*``), ``_llm`` (the client's model). ``Decision``, ``PermissionOutcome``
and ``ToolCallRecord`` are the core's own, reused on the wire as they are.
"""

from ...tool import Decision, PermissionOutcome, ToolCallRecord
from ._lifecycle import (
    ClientCapabilitiesCleverAgents,
    CustomProfile,
    DaemonCapabilities,
    InitializationOptions,
)
from ._llm import (
    LlmDeltaNotification,
    LlmGenerateParams,
    LlmGenerateResult,
    WireMessage,
    WireToolCall,
    WireToolSchema,
)
from ._mcp import (
    McpAddParams,
    McpAddResult,
    McpProtocol,
    McpRemoveParams,
    McpRemoveResult,
    McpServerEntry,
    McpServersParams,
    McpServersResult,
    McpServerStatus,
    McpStatus,
    McpTrust,
)
from ._optional import OPTIONAL, RUN_NOTIFICATIONS, RunNotification, opt, run_notification
from ._runs import (
    EmptyParams,
    EmptyResult,
    IterationNotification,
    MessageDeltaNotification,
    ReasoningDeltaNotification,
    RunError,
    RunFinishedNotification,
    RunIdParams,
    RunListResult,
    RunParams,
    RunResult,
    RunStartedNotification,
    RunStatus,
    RunSummary,
    ToolCallNotification,
    ToolCallStartedNotification,
    UsageWire,
)
from ._tools import (
    ListedTool,
    ListToolsParams,
    ListToolsResult,
    PermissionRequestParams,
    PermissionRequestResult,
    RegisterToolsParams,
    RegisterToolsResult,
    ToolAnnotationsWire,
    ToolDefinition,
    ToolsCallParams,
    ToolsCallResult,
    ToolsChangedNotification,
    ToolSource,
    UnregisterToolsParams,
    UnregisterToolsResult,
)

__all__ = [
    "OPTIONAL",
    "RUN_NOTIFICATIONS",
    "ClientCapabilitiesCleverAgents",
    "CustomProfile",
    "DaemonCapabilities",
    "Decision",
    "EmptyParams",
    "EmptyResult",
    "InitializationOptions",
    "IterationNotification",
    "ListToolsParams",
    "ListToolsResult",
    "ListedTool",
    "LlmDeltaNotification",
    "LlmGenerateParams",
    "LlmGenerateResult",
    "McpAddParams",
    "McpAddResult",
    "McpProtocol",
    "McpRemoveParams",
    "McpRemoveResult",
    "McpServerEntry",
    "McpServerStatus",
    "McpServersParams",
    "McpServersResult",
    "McpStatus",
    "McpTrust",
    "MessageDeltaNotification",
    "ReasoningDeltaNotification",
    "PermissionOutcome",
    "PermissionRequestParams",
    "PermissionRequestResult",
    "RegisterToolsParams",
    "RegisterToolsResult",
    "RunError",
    "RunFinishedNotification",
    "RunIdParams",
    "RunListResult",
    "RunNotification",
    "RunParams",
    "RunResult",
    "RunStartedNotification",
    "RunStatus",
    "RunSummary",
    "ToolAnnotationsWire",
    "ToolCallNotification",
    "ToolCallRecord",
    "ToolCallStartedNotification",
    "ToolDefinition",
    "ToolSource",
    "ToolsCallParams",
    "ToolsCallResult",
    "ToolsChangedNotification",
    "UnregisterToolsParams",
    "UnregisterToolsResult",
    "UsageWire",
    "WireMessage",
    "WireToolCall",
    "WireToolSchema",
    "opt",
    "run_notification",
]
