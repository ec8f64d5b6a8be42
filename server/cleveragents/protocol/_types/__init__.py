"""Wire types of protocol v1, each defined once as an attrs class; this package is their
one namespace (``from cleveragents.protocol import wire``).

Field names are snake_case here and camelCase on the wire (the converter renames).
Fields marked ``OPTIONAL`` are left out of a message when they are ``None``; every other
field is always sent, including ``0``, ``False`` and ``null``. A field's docstring is its
meaning: the JSON Schema document, the TypeScript types and the field tables of
``client-protocol/PROTOCOL.md`` are generated from these classes.

One module per concern: ``_lifecycle`` (``initialize``), ``_tools`` (tool definitions,
``tools/*``, ``permission/request``), ``_runs`` (a run's result and notifications),
``_run_requests`` (``run/*``), ``_mcp`` (an MCP server's entry), ``_mcp_methods``
(``mcp/*``), ``_llm`` (the client's model). ``Decision``, ``PermissionOutcome`` and
``ToolCallRecord`` are the core's own, reused on the wire as they are.

Each class is built when first named here (``wire.RunParams``), not when this package is
imported: ``cleveragents serve`` answers ``initialize`` with only the few it needs.
"""

from __future__ import annotations

import typing

from ...tool import Decision, PermissionOutcome, ToolCallRecord
from . import _optional
from ._optional import OPTIONAL, RunNotification, opt, run_notification

if typing.TYPE_CHECKING:
    from ._checkpoints import (
        ChangeStatus,
        CheckpointRestoreParams,
        Conflict,
        FileChangeWire,
        ForkFrom,
        RestoreResultWire,
        RunDiffParams,
        RunDiffResult,
        RunRevertParams,
    )
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
        McpGrant,
        McpIdentityProvider,
        McpOAuth,
        McpProtocol,
        McpServerEntry,
        McpStatus,
        McpTrust,
    )
    from ._mcp_client import McpElicitParams, McpElicitResult
    from ._mcp_methods import (
        McpAddParams,
        McpAddResult,
        McpLoginParams,
        McpLoginResult,
        McpLogoutParams,
        McpLogoutResult,
        McpRemoveParams,
        McpRemoveResult,
        McpServersParams,
        McpServersResult,
        McpServerStatus,
    )
    from ._optional import RUN_NOTIFICATIONS
    from ._run_requests import (
        CompactionSettings,
        EmptyParams,
        EmptyResult,
        RunIdParams,
        RunLimits,
        RunListResult,
        RunParams,
        RunSummary,
    )
    from ._runs import (
        CheckpointNotification,
        CompactedNotification,
        IterationNotification,
        MessageDeltaNotification,
        ReasoningDeltaNotification,
        RunError,
        RunFinishedNotification,
        RunResult,
        RunStartedNotification,
        RunStatus,
        ToolCallNotification,
        ToolCallProgressNotification,
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

_MODULE_OF: dict[str, str] = {
    "ChangeStatus": "_checkpoints",
    "CheckpointNotification": "_runs",
    "CheckpointRestoreParams": "_checkpoints",
    "ClientCapabilitiesCleverAgents": "_lifecycle",
    "CompactedNotification": "_runs",
    "CompactionSettings": "_run_requests",
    "Conflict": "_checkpoints",
    "CustomProfile": "_lifecycle",
    "DaemonCapabilities": "_lifecycle",
    "EmptyParams": "_run_requests",
    "EmptyResult": "_run_requests",
    "FileChangeWire": "_checkpoints",
    "ForkFrom": "_checkpoints",
    "InitializationOptions": "_lifecycle",
    "IterationNotification": "_runs",
    "ListToolsParams": "_tools",
    "ListToolsResult": "_tools",
    "ListedTool": "_tools",
    "LlmDeltaNotification": "_llm",
    "LlmGenerateParams": "_llm",
    "LlmGenerateResult": "_llm",
    "McpAddParams": "_mcp_methods",
    "McpAddResult": "_mcp_methods",
    "McpElicitParams": "_mcp_client",
    "McpElicitResult": "_mcp_client",
    "McpGrant": "_mcp",
    "McpIdentityProvider": "_mcp",
    "McpLoginParams": "_mcp_methods",
    "McpLoginResult": "_mcp_methods",
    "McpLogoutParams": "_mcp_methods",
    "McpLogoutResult": "_mcp_methods",
    "McpOAuth": "_mcp",
    "McpProtocol": "_mcp",
    "McpRemoveParams": "_mcp_methods",
    "McpRemoveResult": "_mcp_methods",
    "McpServerEntry": "_mcp",
    "McpServerStatus": "_mcp_methods",
    "McpServersParams": "_mcp_methods",
    "McpServersResult": "_mcp_methods",
    "McpStatus": "_mcp",
    "McpTrust": "_mcp",
    "MessageDeltaNotification": "_runs",
    "PermissionRequestParams": "_tools",
    "PermissionRequestResult": "_tools",
    "ReasoningDeltaNotification": "_runs",
    "RegisterToolsParams": "_tools",
    "RegisterToolsResult": "_tools",
    "RestoreResultWire": "_checkpoints",
    "RunDiffParams": "_checkpoints",
    "RunDiffResult": "_checkpoints",
    "RunError": "_runs",
    "RunFinishedNotification": "_runs",
    "RunIdParams": "_run_requests",
    "RunLimits": "_run_requests",
    "RunListResult": "_run_requests",
    "RunParams": "_run_requests",
    "RunResult": "_runs",
    "RunRevertParams": "_checkpoints",
    "RunStartedNotification": "_runs",
    "RunStatus": "_runs",
    "RunSummary": "_run_requests",
    "ToolAnnotationsWire": "_tools",
    "ToolCallNotification": "_runs",
    "ToolCallProgressNotification": "_runs",
    "ToolCallStartedNotification": "_runs",
    "ToolDefinition": "_tools",
    "ToolSource": "_tools",
    "ToolsCallParams": "_tools",
    "ToolsCallResult": "_tools",
    "ToolsChangedNotification": "_tools",
    "UnregisterToolsParams": "_tools",
    "UnregisterToolsResult": "_tools",
    "UsageWire": "_runs",
    "WireMessage": "_llm",
    "WireToolCall": "_llm",
    "WireToolSchema": "_llm",
    "RUN_NOTIFICATIONS": "_runs",  # filled in as _runs decorates its classes
}
"""Each lazily built name -> the module defining it (``RUN_NOTIFICATIONS``: the module
whose import completes it)."""


def __getattr__(name: str) -> typing.Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # __import__, not importlib.import_module: -X importtime (the start-up test's reading)
    # sees only imports that go through it
    defining = __import__(f"{__name__}.{module}", fromlist=[name])
    value = _optional.RUN_NOTIFICATIONS if name == "RUN_NOTIFICATIONS" else getattr(defining, name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "OPTIONAL",
    "RUN_NOTIFICATIONS",
    "ChangeStatus",
    "CheckpointNotification",
    "CheckpointRestoreParams",
    "ClientCapabilitiesCleverAgents",
    "CompactedNotification",
    "CompactionSettings",
    "Conflict",
    "CustomProfile",
    "DaemonCapabilities",
    "Decision",
    "EmptyParams",
    "EmptyResult",
    "FileChangeWire",
    "ForkFrom",
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
    "McpElicitParams",
    "McpElicitResult",
    "McpGrant",
    "McpIdentityProvider",
    "McpLoginParams",
    "McpLoginResult",
    "McpLogoutParams",
    "McpLogoutResult",
    "McpOAuth",
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
    "PermissionOutcome",
    "PermissionRequestParams",
    "PermissionRequestResult",
    "ReasoningDeltaNotification",
    "RegisterToolsParams",
    "RegisterToolsResult",
    "RestoreResultWire",
    "RunDiffParams",
    "RunDiffResult",
    "RunError",
    "RunFinishedNotification",
    "RunIdParams",
    "RunLimits",
    "RunListResult",
    "RunNotification",
    "RunParams",
    "RunResult",
    "RunRevertParams",
    "RunStartedNotification",
    "RunStatus",
    "RunSummary",
    "ToolAnnotationsWire",
    "ToolCallNotification",
    "ToolCallProgressNotification",
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
