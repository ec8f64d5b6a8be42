"""Wire types of the client's model: ``llm/generate`` (the daemon asks) and ``llm/delta``."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ._optional import opt
from ._runs import UsageWire


@attrs.define
class WireToolCall:
    id: str
    """Call id. Must be a string; give a unique one per call."""
    name: str
    """Tool name, unencoded (e.g. ``builtin/file-read``)."""
    arguments: dict[str, Any]
    """Arguments object."""


@attrs.define
class WireMessage:
    """A conversation message in neutral form, as ``llm/generate`` carries it."""

    role: Literal["system", "user", "assistant", "tool"]
    """Who speaks."""
    content: str
    """Text; ``""`` when none."""
    tool_calls: list[WireToolCall] | None = opt()
    """On ``assistant`` messages that called tools."""
    tool_call_id: str | None = opt()
    """On ``tool`` messages: the call answered."""
    name: str | None = opt()
    """On ``tool`` messages: the tool name."""
    is_error: bool | None = opt()
    """On ``tool`` messages: ``true`` when the call failed (then ``content`` is the error)."""


@attrs.define
class WireToolSchema:
    name: str
    """Tool name, unencoded."""
    description: str
    """Tool description."""
    input_schema: dict[str, Any]
    """Arguments schema, with the reserved keys ``sandbox_root`` and ``resource_bindings``
    removed."""


@attrs.define
class LlmGenerateParams:
    run_id: str
    """The run."""
    iteration: int
    """The iteration this call is for."""
    messages: list[WireMessage]
    """The whole conversation so far."""
    tools: list[WireToolSchema]
    """The tools the run sees now, sorted by name."""
    max_tokens: int | None = opt()
    """This call's own cap on the answer's tokens (an MCP server's sampling request
    asked for it); absent: the model's own."""
    temperature: float | None = opt()
    """This call's own temperature (an MCP server's sampling request); absent: the
    model's own."""
    stop_sequences: list[str] | None = opt()
    """This call's stop sequences (an MCP server's sampling request): the answer ends
    before the first of them; absent: none."""


@attrs.define
class LlmGenerateResult:
    content: str
    """The response text; ``""`` when none."""
    tool_calls: list[WireToolCall]
    """Tool calls; ``[]`` ends the run."""
    usage: UsageWire | None = opt()
    """Token usage of this call."""


@attrs.define
class LlmDeltaNotification:
    """Optional client -> daemon notification: text the lent model streamed."""

    run_id: str
    """The run."""
    iteration: int
    """Must equal the pending ``llm/generate``'s iteration, else ignored."""
    text: str
    """A streamed text fragment."""
