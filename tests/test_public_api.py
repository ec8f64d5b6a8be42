"""Each package's public surface, pinned exactly (as httpx pins its own).

A name added to or dropped from an ``__all__`` is a change to what users may import, so
it must show up here, in review. Every public name a package's ``__init__`` binds is in
its ``__all__``: nothing is public by accident.
"""

from __future__ import annotations

import importlib
import types

import pytest

PUBLIC: dict[str, set[str]] = {
    "cleveragents.tool": {
        "DEFAULT_MAX_ITERATIONS", "PERMISSION_OUTCOMES", "RESERVED_INPUT_KEYS",
        "TOOL_NAME_PATTERN", "AllowAll", "CancelToken", "CleverAgentsError", "Decision",
        "DuplicateToolError", "EventSink", "InvalidToolNameError", "IterationFinished",
        "IterationStarted", "MessageDelta", "ReasoningDelta", "AssistantMessage", "Reasoning",
        "ProviderState", "RunError", "RunEvent", "RunFinished", "RunResult",
        "RunStarted", "RunStatus", "ToolCallFinished", "ToolCallStarted", "ToolCallProgress",
        "Media", "result_message", "tool_message", "CallSettings",
        "JSONValue", "JsonRpcCode", "LLMCaller", "LLMRequest", "LLMResponse", "Message",
        "NullEventSink", "PermissionOutcome", "PermissionQuery", "ProviderFormat",
        "ProviderStreamError", "SchemaDefinitionError", "StageObserver", "ToolActivationError",
        "ToolActorContext", "ToolAnnotations", "ToolCall", "ToolCallContext", "ToolCallRecord",
        "ToolCallRouter", "ToolCallRunResult", "ToolCallingRuntime", "ToolCancelledError",
        "ToolError", "ToolHandler", "ToolHandlerError", "ToolInputError", "ToolKind",
        "ToolNotFoundError", "ToolOutputError", "ToolPermissionError", "ToolPolicy",
        "ToolRegistry", "ToolRunner", "ToolSchema", "ToolSpec", "ToolTimeoutError", "Usage",
        "error_classes", "output_text", "register_codec", "NAME_LEAD", "Codec", "NameEncoder",
        "ProviderMessages", "StreamDraft", "ToolDeclaration",
        "BYTES_PER_TOKEN", "Checkpointed", "Compacted", "ContextPolicy", "ContextUsage",
        "ContextWindowExceededError", "HistoryProcessor", "HistoryRewritten", "LimitReason",
        "OutputKeeper", "UsageLimits",
    },
    "cleveragents.workspace": {
        "BUILTIN_PROFILES", "BWRAP_ENV", "DEFAULT_PROFILE", "AskCallback", "AutomationProfile",
        "Confinement", "GitIgnore", "PinnedRoot", "ProfileError", "ProfilePolicy", "SandboxViolationError",
        "ShellTool", "WorkspaceLimits", "WorkspaceToolError", "builtin_tools", "file_tools",
        "get_profile",
        "parse_profile", "read_confined_head", "read_confined_text", "resolve_path",
    },
    "cleveragents.llm": {
        "ModelConfigError", "ModelProviderError", "ModelSource", "ModelSpec", "ReasoningSettings", "ScriptedModel",
        "create_caller", "parse_model_spec", "resolve_model_spec", "Provider", "get_provider",
        "providers", "register_provider", "log_scrubber",
        "DEFAULT_WINDOW", "ContextOverflowError", "KnownModel", "find_model", "known_models",
        "register_model",
    },
    "cleveragents.protocol": {
        "BY_NAME", "MAX_BODY", "METHODS", "PROTOCOL_VERSION", "RUN_EVENTS", "EventEncoder",
        "FrameReader", "Method", "ParamsError", "RawJson", "RpcError", "camel", "converter",
        "dumps", "encode_frame", "fits", "frame", "methods", "read_body", "result_wire",
        "structure", "unstructure", "usage_wire", "wire", "wire_notification",
    },
    "cleveragents.mcp": {
        "RESTARTS_PER_MINUTE", "SDK_MISSING", "SERVER_NAME_PATTERN", "McpConfigError",
        "McpServer", "McpServerConfig", "McpToolError", "ProtocolVersion", "Scope", "Status",
        "Transport", "Trust", "mcp_available", "OAuthConfig", "TokenStore",
        "NO_HOOKS", "ClientHooks", "ElicitAction", "ElicitMode", "Elicitation", "ElicitationAnswer",
        "Sampling", "SamplingAnswer", "SamplingRefused", "IdentityProviderConfig",
        "secret_variable", "idp_secret_variable",
    },
    "cleveragents.transcripts": {
        "INTERRUPTED_MESSAGE", "META", "PROMPT_SUMMARY_MAX", "RunInterruptedError",
        "RunNotFoundError", "RunRecorder", "RunStateError", "Transcript", "TranscriptStore",
        "default_state_dir", "valid_run_id",
    },
    "cleveragents.daemon": {
        "CapabilityError", "CleverAgentsServer", "DaemonConfig", "DaemonRuns",
        "NotInitializedError", "RunInterruptedError", "RunNotFoundError", "RunStateError",
        "StateDirError", "TranscriptStore", "create_server", "default_state_dir", "serve",
    },
    "cleveragents.client": {
        "Client", "DaemonConnection", "DaemonStartError", "RpcError",
    },
    "cleveragents.acp": {"AcpAgent", "create_agent", "serve"},
    "cleveragents.checkpoints": {
        "Checkpoint", "CheckpointError", "CheckpointNotFoundError", "CheckpointSettings",
        "CheckpointStore", "DiffResult", "FileChange", "Note", "PruneResult", "RestoreResult",
        "diffstat", "diffstat_totals", "quote_path", "stored_workspaces",
    },
    "cleveragents.runs": {
        "COLLECTOR", "DEFAULT_MAX_ITERATIONS", "DEFAULT_MAX_TOOL_OUTPUT_BYTES",
        "MAX_TOOL_OUTPUT_BYTES", "AskUser", "CapabilityError", "CollectorPolicy",
        "Elicit", "Elicitation", "ElicitationAnswer", "McpClientSide",
        "McpServerState", "McpServers", "PermissionPrompt", "RunHandle", "RunObserver",
        "RunRequest", "RunRequestError", "RunService", "RunSettings", "StateDirError",
        "model_spec", "prepare_process", "reserved", "CompactionSettings", "ForkFrom",
    },
    "cleveragents.rpc": {
        "CANCEL_REQUEST", "EXIT_CODES", "HIGH_WATER", "LOW_WATER", "MAX_DEPTH", "CurrentPeer",
        "Dispatcher", "FrameSink", "Handlers", "NotInitializedError", "NotificationHandler",
        "Peer", "RequestHandler", "RpcError", "StreamSink", "call_peer", "install_signals",
        "keepalive",
        "open_stdio", "prepare_process", "to_configs", "to_rpc_error",
    },
}  # fmt: skip


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_names_are_exactly_these(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) == PUBLIC[package]
    assert len(module.__all__) == len(set(module.__all__))
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_nothing_is_public_by_accident(package: str) -> None:
    module = importlib.import_module(package)
    bound = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name != "annotations"  # from __future__ import annotations
        and not isinstance(value, types.ModuleType)
    }
    assert bound - set(module.__all__) == set()


def test_the_reference_example_s_names_are_public() -> None:
    """The names the reference (docs/runtime.md, README.md) imports from the core."""
    tool = importlib.import_module("cleveragents.tool")
    assert PUBLIC["cleveragents.tool"] >= {
        "ToolRegistry", "ToolRunner", "ToolCallRouter", "LLMCaller", "ToolActorContext",
        "ToolCallRecord", "ToolCallRunResult", "ToolCallingRuntime", "ToolSpec",
    }  # fmt: skip
    assert all(hasattr(tool, name) for name in PUBLIC["cleveragents.tool"])
