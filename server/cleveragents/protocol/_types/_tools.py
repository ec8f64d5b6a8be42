"""Wire types of the tools: definitions, ``tools/*`` requests, ``tools/call`` and
``permission/request`` (the daemon asks the client), and ``tools/changed``."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ...tool import PermissionOutcome
from ._optional import opt

ToolSource = Literal["builtin", "client", "mcp"]


@attrs.define
class ToolAnnotationsWire:
    """Hints about a tool's effects; a tool without them counts as a write."""

    read_only: bool | None = opt()
    """The tool only reads. Automation profiles treat it as a ``read`` tool; otherwise it is a
    ``write`` tool."""
    destructive: bool | None = opt()
    """The tool may destroy data. Informational."""
    idempotent: bool | None = opt()
    """Repeating a call has no further effect. Informational."""


@attrs.define
class ToolDefinition:
    """A tool as a client registers it (and as ``tools/list`` shows it)."""

    name: str
    """Tool name (rules, PROTOCOL.md §12). Kept exactly; the daemon adds no prefix."""
    description: str
    """Text shown to the model."""
    input_schema: dict[str, Any]
    """JSON Schema of the arguments. Must compile, else -32602."""
    output_schema: dict[str, Any] | None = opt()
    """JSON Schema of the output. A non-matching output makes a failed record."""
    annotations: ToolAnnotationsWire | None = opt()
    """Effect hints."""
    timeout_ms: int | None = opt()
    """Timeout of one ``tools/call``, > 0. Default 120000."""


@attrs.define
class ListedTool:
    """A ``ToolDefinition`` plus where the tool comes from."""

    name: str
    """Tool name."""
    description: str
    """Text shown to the model."""
    input_schema: dict[str, Any]
    """JSON Schema of the arguments, as registered."""
    source: ToolSource
    """``builtin`` (the daemon's own), ``client`` (registered with ``tools/register``) or ``mcp``
    (an MCP server's, named ``mcp:SERVER/TOOL``)."""
    output_schema: dict[str, Any] | None = opt()
    """JSON Schema of the output, if any."""
    annotations: ToolAnnotationsWire | None = opt()
    """Effect hints. Always present in ``tools/list``, all three flags set."""
    timeout_ms: int | None = opt()
    """Timeout in ms. Always present in ``tools/list`` (client tools registered without one show
    120000)."""


@attrs.define
class RegisterToolsParams:
    tools: list[ToolDefinition]
    """The tools to register. All or none: one bad definition refuses the whole call."""
    run_id: str | None = opt()
    """Register for this active run only. Visible from the run's next LLM call."""
    replace: bool | None = opt()
    """``true``: replace tools of the same name instead of failing with -32013."""


@attrs.define
class RegisterToolsResult:
    registered: list[str]
    """The names registered, in request order."""


@attrs.define
class UnregisterToolsParams:
    names: list[str]
    """Names to remove. All or none: one unknown name refuses the whole call."""
    run_id: str | None = opt()
    """Remove from this active run's own tools (not from the shared ones)."""


@attrs.define
class UnregisterToolsResult:
    unregistered: list[str]
    """The names removed."""


@attrs.define
class ListToolsParams:
    run_id: str | None = opt()
    """List what this active run sees (shared tools after its allow-list, plus its own)."""


@attrs.define
class ListToolsResult:
    tools: list[ListedTool]
    """The tools, sorted by name."""


@attrs.define
class ToolsChangedNotification:
    """The tools a source offers changed (an MCP server became ready, changed its list, failed or
    was removed): refresh any view of ``tools/list``."""

    source: ToolSource
    """Which kind of source; today always ``mcp``."""
    server: str | None = opt()
    """The MCP server's name."""


@attrs.define
class ToolsCallParams:
    run_id: str
    """The run that called the tool."""
    call_id: str
    """The call id (as in ``run/toolCallStarted`` and the record)."""
    iteration: int
    """The iteration."""
    name: str
    """The registered tool name."""
    arguments: dict[str, Any]
    """The model's arguments, exactly as sent: schema defaults are not filled in. Reserved keys the
    model sent stay here untouched."""
    sandbox_root: str
    """The run's sandbox root."""
    resource_bindings: dict[str, Any]
    """The run's ``resourceBindings``, ``{}`` when none."""


@attrs.define
class ToolsCallResult:
    output: Any
    """The tool's output, any JSON (including ``null``). Required."""
    is_error: bool | None = opt()
    """``true``: the call failed; the record's ``error`` is ``output`` as text."""


@attrs.define
class PermissionRequestParams:
    run_id: str
    """The run."""
    call_id: str
    """The call waiting for the answer."""
    tool_name: str
    """The tool."""
    inputs: dict[str, Any]
    """What the tool will receive: the model's arguments with the run's reserved ``sandbox_root``
    and ``resource_bindings``, which always replace any the model sent. (The call's record keeps the
    model's own arguments.)"""
    reason: str
    """Why the profile asks, e.g. ``profile 'supervised' asks before write tools``. When the model
    sent its own values for reserved keys, it ends ``; the model's own sandbox_root was replaced by
    the run's``."""


@attrs.define
class PermissionRequestResult:
    outcome: PermissionOutcome
    """The user's answer. ``*_always`` lasts for the rest of the run, per tool name."""
