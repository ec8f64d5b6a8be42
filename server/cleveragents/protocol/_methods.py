"""The method table of protocol v1: every name, its direction, its params and result types.

The daemon, the Python client, the tests and the schema generator all read this one
table; nothing else spells a method name. The run notifications come from their wire
classes (``@run_notification``): each maps one core run event (``cleveragents.tool``'s
``RunEvent`` classes) to its method, so ``RUN_EVENTS`` is every face's one list of them.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ..tool import (
    Checkpointed,
    Compacted,
    IterationFinished,
    MessageDelta,
    ReasoningDelta,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from . import _types as t

PROTOCOL_VERSION = 1

# client -> daemon requests
TOOLS_REGISTER = "tools/register"
TOOLS_UNREGISTER = "tools/unregister"
TOOLS_LIST = "tools/list"
RUN_START = "run/start"
RUN_CANCEL = "run/cancel"
RUN_LIST = "run/list"
RUN_GET = "run/get"
MCP_ADD = "mcp/add"
MCP_REMOVE = "mcp/remove"
MCP_SERVERS = "mcp/servers"
RUN_DIFF = "run/diff"
RUN_REVERT = "run/revert"
CHECKPOINT_RESTORE = "checkpoint/restore"
MCP_LOGIN = "mcp/login"
MCP_LOGOUT = "mcp/logout"
# daemon -> client notifications: the run's, named by their core events (see RUN_EVENTS)
_BY_EVENT: dict[type, str] = {n.event: n.method for n in t.RUN_NOTIFICATIONS}
RUN_STARTED = _BY_EVENT[RunStarted]
RUN_MESSAGE_DELTA = _BY_EVENT[MessageDelta]
RUN_REASONING_DELTA = _BY_EVENT[ReasoningDelta]
RUN_TOOL_CALL_STARTED = _BY_EVENT[ToolCallStarted]
RUN_TOOL_CALL = _BY_EVENT[ToolCallFinished]
RUN_TOOL_CALL_PROGRESS = _BY_EVENT[ToolCallProgress]
RUN_ITERATION = _BY_EVENT[IterationFinished]
RUN_FINISHED = _BY_EVENT[RunFinished]
RUN_COMPACTED = _BY_EVENT[Compacted]
RUN_CHECKPOINT = _BY_EVENT[Checkpointed]
TOOLS_CHANGED = "tools/changed"
# daemon -> client requests
TOOLS_CALL = "tools/call"
PERMISSION_REQUEST = "permission/request"
LLM_GENERATE = "llm/generate"
MCP_ELICIT = "mcp/elicit"
# client -> daemon notifications
LLM_DELTA = "llm/delta"

Direction = Literal["client->daemon", "daemon->client"]
Kind = Literal["request", "notification"]


@attrs.frozen
class Method:
    """One method of the table. Its params and result types are named (a wire class or
    its name in ``cleveragents.protocol.wire``) and looked up at first use: the table
    itself builds no wire class, so a daemon's start builds only those it meets."""

    name: str
    kind: Kind
    direction: Direction
    params_type: type | str = attrs.field(alias="params")
    result_type: type | str | None = attrs.field(alias="result")
    summary: str
    event: type | None = None
    """For a run notification: the core event class it carries."""

    def __attrs_post_init__(self) -> None:
        for named in (self.params_type, self.result_type):  # a misspelt name fails at import
            if isinstance(named, str) and named not in t.__all__:
                raise ValueError(f"no wire type named {named!r} in cleveragents.protocol.wire")

    @property
    def params(self) -> type:
        return _resolve(self.params_type)

    @property
    def result(self) -> type | None:
        return None if self.result_type is None else _resolve(self.result_type)


def _resolve(named: type | str) -> type:
    found: type = getattr(t, named) if isinstance(named, str) else named
    return found


METHODS: tuple[Method, ...] = (
    Method(TOOLS_REGISTER, "request", "client->daemon", "RegisterToolsParams",
           "RegisterToolsResult", "Register client tools, daemon-wide or for one run."),
    Method(TOOLS_UNREGISTER, "request", "client->daemon", "UnregisterToolsParams",
           "UnregisterToolsResult", "Remove client tools."),
    Method(TOOLS_LIST, "request", "client->daemon", "ListToolsParams", "ListToolsResult",
           "List the tools a run (or the daemon) can see, sorted by name."),
    Method(RUN_START, "request", "client->daemon", "RunParams", "RunResult",
           "Start a run; the reply comes when the run ends."),
    Method(RUN_CANCEL, "request", "client->daemon", "RunIdParams", "EmptyResult",
           "Cancel a run; its run/start resolves with status 'cancelled'."),
    Method(RUN_LIST, "request", "client->daemon", "EmptyParams", "RunListResult",
           "Active and persisted runs."),
    Method(RUN_GET, "request", "client->daemon", "RunIdParams", "RunResult",
           "A run's result, from memory or from its transcript."),
    Method(MCP_ADD, "request", "client->daemon", "McpAddParams", "McpAddResult",
           "Mount MCP servers daemon-wide; each starts in the background."),
    Method(MCP_REMOVE, "request", "client->daemon", "McpRemoveParams", "McpRemoveResult",
           "Stop and unmount daemon-wide MCP servers."),
    Method(MCP_SERVERS, "request", "client->daemon", "McpServersParams", "McpServersResult",
           "The MCP servers and how each is doing (with runId: that run's own too)."),
    Method(MCP_LOGIN, "request", "client->daemon", "McpLoginParams", "McpLoginResult",
           "Forget an MCP server's tokens and start its sign-in again."),
    Method(MCP_LOGOUT, "request", "client->daemon", "McpLogoutParams", "McpLogoutResult",
           "Forget an MCP server's tokens and registration; it needs a sign-in again."),
    Method(RUN_DIFF, "request", "client->daemon", "RunDiffParams", "RunDiffResult",
           "What a run (or one of its iterations) changed in the workspace's files."),
    Method(RUN_REVERT, "request", "client->daemon", "RunRevertParams", "RestoreResultWire",
           "Put the files a run changed back as they were before it (or after an iteration)."),
    Method(CHECKPOINT_RESTORE, "request", "client->daemon", "CheckpointRestoreParams",
           "RestoreResultWire", "Put a workspace back as it was at a checkpoint."),
    *(Method(n.method, "notification", "daemon->client", n.wire, None, n.summary, n.event)
      for n in t.RUN_NOTIFICATIONS),
    Method(TOOLS_CHANGED, "notification", "daemon->client", "ToolsChangedNotification",
           None, "A tool source's tools changed: refresh tools/list."),
    Method(TOOLS_CALL, "request", "daemon->client", "ToolsCallParams", "ToolsCallResult",
           "Run a client-registered tool."),
    Method(PERMISSION_REQUEST, "request", "daemon->client", "PermissionRequestParams",
           "PermissionRequestResult", "Ask the user whether a call may run."),
    Method(LLM_GENERATE, "request", "daemon->client", "LlmGenerateParams",
           "LlmGenerateResult", "One LLM call on the editor's own model."),
    Method(MCP_ELICIT, "request", "daemon->client", "McpElicitParams", "McpElicitResult",
           "An MCP server asks the user (form or URL); needs the elicitation capability."),
    Method(LLM_DELTA, "notification", "client->daemon", "LlmDeltaNotification", None,
           "Optional: text the editor's model streamed during llm/generate."),
)  # fmt: skip

BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}

RUN_EVENTS: dict[type, Method] = {m.event: m for m in METHODS if m.event is not None}
"""Each core run event that goes on the wire -> its notification (in the table's order).
An event class not here (``IterationStarted``) is not sent."""

LIFECYCLE: dict[type, str] = {
    t.InitializationOptions: "initialize params: initializationOptions",
    t.ClientCapabilitiesCleverAgents: "initialize params: capabilities.experimental.cleveragents",
    t.DaemonCapabilities: "initialize result: capabilities.experimental.cleveragents",
}
"""Contract types that belong to ``initialize`` rather than to one of our methods, and
where ``initialize`` carries each."""

LIFECYCLE_TYPES: tuple[type, ...] = tuple(LIFECYCLE)

DAEMON_REQUESTS: tuple[str, ...] = tuple(
    m.name for m in METHODS if m.kind == "request" and m.direction == "client->daemon"
)
