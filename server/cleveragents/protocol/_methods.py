"""The method table of protocol v1: every name, its direction, its params and result types.

The daemon, the Python client, the tests and the schema generator all read this one
table; nothing else spells a method name.
"""

from __future__ import annotations

from typing import Literal

import attrs

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
# daemon -> client notifications
RUN_STARTED = "run/started"
RUN_MESSAGE_DELTA = "run/messageDelta"
RUN_TOOL_CALL_STARTED = "run/toolCallStarted"
RUN_TOOL_CALL = "run/toolCall"
RUN_ITERATION = "run/iteration"
RUN_FINISHED = "run/finished"
TOOLS_CHANGED = "tools/changed"
# daemon -> client requests
TOOLS_CALL = "tools/call"
PERMISSION_REQUEST = "permission/request"
LLM_GENERATE = "llm/generate"
# client -> daemon notifications
LLM_DELTA = "llm/delta"

Direction = Literal["client->daemon", "daemon->client"]
Kind = Literal["request", "notification"]


@attrs.frozen
class Method:
    name: str
    kind: Kind
    direction: Direction
    params: type
    result: type | None
    summary: str


METHODS: tuple[Method, ...] = (
    Method(TOOLS_REGISTER, "request", "client->daemon", t.RegisterToolsParams,
           t.RegisterToolsResult, "Register client tools, daemon-wide or for one run."),
    Method(TOOLS_UNREGISTER, "request", "client->daemon", t.UnregisterToolsParams,
           t.UnregisterToolsResult, "Remove client tools."),
    Method(TOOLS_LIST, "request", "client->daemon", t.ListToolsParams, t.ListToolsResult,
           "List the tools a run (or the daemon) can see, sorted by name."),
    Method(RUN_START, "request", "client->daemon", t.RunParams, t.RunResult,
           "Start a run; the reply comes when the run ends."),
    Method(RUN_CANCEL, "request", "client->daemon", t.RunIdParams, t.EmptyResult,
           "Cancel a run; its run/start resolves with status 'cancelled'."),
    Method(RUN_LIST, "request", "client->daemon", t.EmptyParams, t.RunListResult,
           "Active and persisted runs."),
    Method(RUN_GET, "request", "client->daemon", t.RunIdParams, t.RunResult,
           "A run's result, from memory or from its transcript."),
    Method(MCP_ADD, "request", "client->daemon", t.McpAddParams, t.McpAddResult,
           "Mount MCP servers daemon-wide; each starts in the background."),
    Method(MCP_REMOVE, "request", "client->daemon", t.McpRemoveParams, t.McpRemoveResult,
           "Stop and unmount daemon-wide MCP servers."),
    Method(MCP_SERVERS, "request", "client->daemon", t.McpServersParams, t.McpServersResult,
           "The MCP servers and how each is doing (with runId: that run's own too)."),
    Method(RUN_STARTED, "notification", "daemon->client", t.RunStartedNotification, None,
           "The run began."),
    Method(RUN_MESSAGE_DELTA, "notification", "daemon->client", t.MessageDeltaNotification,
           None, "The model streamed text."),
    Method(RUN_TOOL_CALL_STARTED, "notification", "daemon->client",
           t.ToolCallStartedNotification, None, "A tool is about to execute."),
    Method(RUN_TOOL_CALL, "notification", "daemon->client", t.ToolCallNotification, None,
           "A tool call ended, whatever the outcome."),
    Method(RUN_ITERATION, "notification", "daemon->client", t.IterationNotification, None,
           "An iteration ended, its tools included."),
    Method(RUN_FINISHED, "notification", "daemon->client", t.RunFinishedNotification, None,
           "The run ended; nothing more is sent for it."),
    Method(TOOLS_CHANGED, "notification", "daemon->client", t.ToolsChangedNotification,
           None, "A tool source's tools changed: refresh tools/list."),
    Method(TOOLS_CALL, "request", "daemon->client", t.ToolsCallParams, t.ToolsCallResult,
           "Run a client-registered tool."),
    Method(PERMISSION_REQUEST, "request", "daemon->client", t.PermissionRequestParams,
           t.PermissionRequestResult, "Ask the user whether a call may run."),
    Method(LLM_GENERATE, "request", "daemon->client", t.LlmGenerateParams,
           t.LlmGenerateResult, "One LLM call on the editor's own model."),
    Method(LLM_DELTA, "notification", "client->daemon", t.LlmDeltaNotification, None,
           "Optional: text the editor's model streamed during llm/generate."),
)  # fmt: skip

BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}

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
