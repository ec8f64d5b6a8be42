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
