"""Wire types of protocol v1, each defined once as an attrs class.

Field names are snake_case here and camelCase on the wire (the converter renames).
Fields marked ``OPTIONAL`` are left out of a message when they are ``None``; every other
field is always sent, including ``0``, ``False`` and ``null``. JSON Schemas, the
TypeScript types and the docs tables are generated from these classes.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ..tool import ToolCallRecord

OPTIONAL = {"optional": True}
"""Field metadata: omitted from the wire when ``None``; not required on input."""

RunStatus = Literal["completed", "limit", "cancelled", "failed"]
ToolSource = Literal["builtin", "client", "mcp"]
PermissionOutcome = Literal["allow_once", "allow_always", "reject_once", "reject_always"]
McpProtocol = Literal["2025-11-25", "2026-07-28"]
McpTrust = Literal["read", "write", "execute"]
McpStatus = Literal["starting", "ready", "failed", "stopped"]

# ToolCallRecord is the core's own type, reused on the wire (design §2).
ToolCallRecord = ToolCallRecord


def opt() -> Any:
    return attrs.field(default=None, metadata=OPTIONAL)


# -- shared shapes -----------------------------------------------------------------------


@attrs.define
class ToolAnnotationsWire:
    """Hints about a tool's effects; a tool without them counts as a write."""

    read_only: bool | None = opt()
    destructive: bool | None = opt()
    idempotent: bool | None = opt()


@attrs.define
class ToolDefinition:
    """A tool as a client registers it (and as ``tools/list`` shows it)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = opt()
    annotations: ToolAnnotationsWire | None = opt()
    timeout_ms: int | None = opt()


@attrs.define
class ListedTool:
    """A ``ToolDefinition`` plus where the tool comes from."""

    name: str
    description: str
    input_schema: dict[str, Any]
    source: ToolSource
    output_schema: dict[str, Any] | None = opt()
    annotations: ToolAnnotationsWire | None = opt()
    timeout_ms: int | None = opt()


@attrs.define
class UsageWire:
    input_tokens: int
    output_tokens: int


@attrs.define
class RunError:
    code: int
    message: str


@attrs.define
class RunResult:
    """The outcome of a run: the ``run/start`` reply, ``run/get``, and ``run/finished``."""

    run_id: str
    status: RunStatus
    content: str
    tool_call_history: list[ToolCallRecord]
    iterations: int
    terminated_by_limit: bool
    duration_ms: float
    error: RunError | None = opt()
    usage: UsageWire | None = opt()
    omitted_records: int | None = opt()
    """How many of the oldest records ``toolCallHistory`` leaves out because the result
    would not fit one 64 MiB frame; each was sent in its own ``run/toolCall`` and is in
    the transcript."""


@attrs.define
class RunSummary:
    """One line of ``run/list``: an active or persisted run."""

    run_id: str
    status: Literal["running", "completed", "limit", "cancelled", "failed"]
    prompt: str
    started_at: str
    iterations: int
    tool_call_count: int
    active: bool


# -- initialize ---------------------------------------------------------------------------


Decision = Literal["allow", "ask", "deny"]


@attrs.define
class CustomProfile:
    """An automation profile defined by the client: what each tool kind may do."""

    __wire_strict__ = True  # a misspelt key is an error, not a silently ignored setting

    read: Decision
    write: Decision
    execute: Decision
    requires_confined_shell: bool | None = opt()
    never_ask: bool | None = opt()
    description: str | None = opt()


@attrs.define
class McpServerEntry:
    """An MCP server mounted as a tool source: stdio (``command``) or streamable HTTP
    (``url``), exactly one of the two. Its tools appear as ``mcp:NAME/TOOL``."""

    __wire_strict__ = True  # a misspelt key is an error, not a silently ignored setting

    name: str
    """``^[A-Za-z0-9_-]{1,64}$``, unique in its scope (the daemon, or the run)."""
    command: str | None = opt()
    """stdio: the program to start (not confined: it is code the client chose to run)."""
    args: list[str] | None = opt()
    env: dict[str, str] | None = opt()
    """stdio: added to the shell's allow-listed environment (never the daemon's own)."""
    cwd: str | None = opt()
    """stdio: the working directory; default the sandbox root."""
    url: str | None = opt()
    """streamable HTTP: the server's endpoint (http or https)."""
    headers: dict[str, str] | None = opt()
    timeout_ms: int | None = opt()
    """Per call; default 120,000. Progress does not extend it."""
    startup_timeout_ms: int | None = opt()
    """How long a run waits for the server to be ready; default 10,000."""
    include: list[str] | None = opt()
    """Tool names or globs to mount (default all)."""
    exclude: list[str] | None = opt()
    """Tool names or globs to leave out."""
    protocol: McpProtocol | None = opt()
    """Force a protocol version instead of detecting it."""
    trust: McpTrust | None = opt()
    """The kind every tool of the server counts as for the automation profile; default:
    ``readOnlyHint: true`` is a read, anything else a write."""


@attrs.define
class InitializationOptions:
    """``initialize`` → ``initializationOptions``: defaults for every run."""

    model: str | dict[str, Any] | None = opt()
    automation_profile: str | None = opt()
    state_dir: str | None = opt()
    profiles: dict[str, CustomProfile] | None = opt()
    max_tool_output_bytes: int | None = opt()
    """A tool output larger than this (default 1 MiB) is cut for the record, the
    notifications and the model; the full output is kept under the state dir."""
    shell_env: list[str] | None = opt()
    """Names of the daemon's environment variables passed through to ``builtin/shell``,
    beyond its fixed allow-list."""
    token: str | None = opt()
    """The ``--tcp`` access token; required on TCP, ignored on stdio."""
    mcp_servers: list[McpServerEntry] | None = opt()
    """MCP servers for every run, started in the background at ``initialize``."""


@attrs.define
class ClientCapabilitiesCleverAgents:
    """``initialize`` → ``capabilities.experimental.cleveragents``: what the client serves."""

    permissions: bool | None = opt()
    llm: bool | None = opt()


@attrs.define
class DaemonCapabilities:
    """The ``initialize`` result's ``capabilities.experimental.cleveragents``."""

    protocol_version: int
    methods: list[str]
    builtin_tools: list[str]


# -- client -> daemon requests -----------------------------------------------------------


@attrs.define
class RegisterToolsParams:
    tools: list[ToolDefinition]
    run_id: str | None = opt()
    replace: bool | None = opt()


@attrs.define
class RegisterToolsResult:
    registered: list[str]


@attrs.define
class UnregisterToolsParams:
    names: list[str]
    run_id: str | None = opt()


@attrs.define
class UnregisterToolsResult:
    unregistered: list[str]


@attrs.define
class ListToolsParams:
    run_id: str | None = opt()


@attrs.define
class ListToolsResult:
    tools: list[ListedTool]


@attrs.define
class RunParams:
    """Everything a run may be started with; only ``prompt`` is required."""

    prompt: str
    run_id: str | None = opt()
    system_prompt: str | None = opt()
    model: str | dict[str, Any] | None = opt()
    max_iterations: int | None = opt()
    tools: list[str] | None = opt()
    sandbox_root: str | None = opt()
    plan_id: str | None = opt()
    phase: str | None = opt()
    automation_profile: str | None = opt()
    resource_bindings: dict[str, Any] | None = opt()
    project_resources: dict[str, Any] | None = opt()
    continue_from: str | None = opt()
    work_done_token: str | int | None = opt()
    mcp_servers: list[McpServerEntry] | None = opt()
    """MCP servers for this run only: started before its first iteration, stopped at its end."""


@attrs.define
class RunIdParams:
    """Params of ``run/cancel`` and ``run/get``."""

    run_id: str


@attrs.define
class EmptyParams:
    """Params of ``run/list``: an empty object."""


@attrs.define
class EmptyResult:
    """The ``{}`` reply of ``run/cancel``."""


@attrs.define
class RunListResult:
    runs: list[RunSummary]


@attrs.define
class McpAddParams:
    servers: list[McpServerEntry]


@attrs.define
class McpAddResult:
    """The names added; each server then starts in the background (see ``mcp/servers``)."""

    added: list[str]


@attrs.define
class McpRemoveParams:
    names: list[str]


@attrs.define
class McpRemoveResult:
    removed: list[str]


@attrs.define
class McpServersParams:
    run_id: str | None = opt()
    """Also list that run's own servers."""


@attrs.define
class McpServerStatus:
    """One MCP server: where it is configured, how it is reached, and how it is doing."""

    name: str
    scope: Literal["daemon", "run"]
    transport: Literal["stdio", "http"]
    status: McpStatus
    tool_count: int
    protocol_version: str | None = opt()
    error: str | None = opt()
    stderr_tail: str | None = opt()
    """The last 20 lines (at most 4 KiB) of a stdio server's stderr."""


@attrs.define
class McpServersResult:
    servers: list[McpServerStatus]


# -- daemon -> client notifications ------------------------------------------------------


@attrs.define
class RunStartedNotification:
    run_id: str
    seq: int
    sandbox_root: str
    max_iterations: int
    tools: list[str]


@attrs.define
class MessageDeltaNotification:
    run_id: str
    seq: int
    iteration: int
    text: str


@attrs.define
class ToolCallStartedNotification:
    run_id: str
    seq: int
    iteration: int
    call_id: str
    tool_name: str
    inputs: dict[str, Any]


@attrs.define
class ToolCallNotification:
    run_id: str
    seq: int
    record: ToolCallRecord


@attrs.define
class IterationNotification:
    run_id: str
    seq: int
    iteration: int
    content: str
    tool_call_count: int
    duration_ms: float
    usage: UsageWire | None = opt()


@attrs.define
class ToolsChangedNotification:
    """The tools a source offers changed (an MCP server became ready, changed its list,
    failed or was removed): refresh any view of ``tools/list``."""

    source: ToolSource
    server: str | None = opt()


@attrs.define
class RunFinishedNotification:
    run_id: str
    seq: int
    result: RunResult


# -- daemon -> client requests -----------------------------------------------------------


@attrs.define
class ToolsCallParams:
    run_id: str
    call_id: str
    iteration: int
    name: str
    arguments: dict[str, Any]
    sandbox_root: str
    resource_bindings: dict[str, Any]


@attrs.define
class ToolsCallResult:
    output: Any
    is_error: bool | None = opt()


@attrs.define
class PermissionRequestParams:
    run_id: str
    call_id: str
    tool_name: str
    inputs: dict[str, Any]
    reason: str


@attrs.define
class PermissionRequestResult:
    outcome: PermissionOutcome


@attrs.define
class WireToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@attrs.define
class WireMessage:
    """A conversation message in neutral form, as ``llm/generate`` carries it."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[WireToolCall] | None = opt()
    tool_call_id: str | None = opt()
    name: str | None = opt()
    is_error: bool | None = opt()


@attrs.define
class WireToolSchema:
    name: str
    description: str
    input_schema: dict[str, Any]


@attrs.define
class LlmGenerateParams:
    run_id: str
    iteration: int
    messages: list[WireMessage]
    tools: list[WireToolSchema]


@attrs.define
class LlmGenerateResult:
    content: str
    tool_calls: list[WireToolCall]
    usage: UsageWire | None = opt()


@attrs.define
class LlmDeltaNotification:
    """Optional client -> daemon notification: text the lent model streamed."""

    run_id: str
    iteration: int
    text: str
