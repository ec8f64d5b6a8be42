"""Neutral value types of the loop: messages, tool calls, model responses, records, context.

These are provider-neutral and transport-neutral. Provider adapters translate them with
``ToolCallRouter``; the daemon's wire layer reuses ``ToolCallRecord`` as is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import attrs

if TYPE_CHECKING:
    from ._cancel import CancelToken

JSONValue: TypeAlias = Any
"""Any JSON value. Kept as ``Any`` on purpose: tool outputs are arbitrary JSON."""

Role = Literal["system", "user", "assistant", "tool"]

RESERVED_INPUT_KEYS: frozenset[str] = frozenset({"sandbox_root", "resource_bindings"})
"""Inputs that always come from the ``ToolActorContext``, never from the model."""


@attrs.define(slots=True)
class Usage:
    """Token usage of one LLM call, or the sum over a run."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@attrs.define(slots=True)
class ToolCall:
    """One tool call the model asked for, in neutral form.

    ``parse_error`` is set when the provider's argument text was not a JSON object; the
    runner then records a failed call instead of running the tool.
    """

    id: str
    name: str
    arguments: dict[str, JSONValue] = attrs.field(factory=dict)
    parse_error: str | None = None


@attrs.define(slots=True)
class Message:
    """One conversation message in neutral form.

    ``tool_calls`` is set on assistant messages that ask for tools; ``tool_call_id`` and
    ``name`` on tool-result messages; ``is_error`` marks a failed tool result.
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = attrs.field(factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False


@attrs.define(slots=True)
class LLMResponse:
    """What one LLM call produced: text, tool calls, and usage when the provider reports it."""

    content: str = ""
    tool_calls: list[ToolCall] = attrs.field(factory=list)
    usage: Usage | None = None
    stop_reason: str | None = None


@attrs.define(slots=True, frozen=True)
class ToolSchema:
    """A tool as the model sees it: the reserved inputs are already removed."""

    name: str
    description: str
    parameters: Mapping[str, JSONValue]


@attrs.define(slots=True)
class LLMRequest:
    """Everything an ``LLMCaller`` needs for one call.

    ``messages`` is the run's live history (do not mutate it). ``on_delta`` reports
    streamed text as it arrives; ``cancel`` is set when the run is being cancelled.
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSchema]
    iteration: int
    context: ToolActorContext
    cancel: CancelToken
    on_delta: Callable[[str], None]


class LLMCaller(Protocol):
    """Calls a model once. May be sync (returns ``LLMResponse``) or async (returns an awaitable)."""

    def __call__(self, request: LLMRequest, /) -> LLMResponse | Awaitable[LLMResponse]: ...


@attrs.define(slots=True)
class ToolCallRecord:
    """The record of one tool call, whatever its outcome.

    ``inputs`` holds the arguments the model sent (never the reserved context keys that
    the runner added). ``iteration`` is the number of the LLM call that asked for it.
    ``error_code`` is the JSON-RPC code of the error class that failed the call (see
    ``cleveragents.tool``'s error tree), or ``None`` when it succeeded.
    """

    tool_name: str
    """The tool name."""
    inputs: dict[str, JSONValue]
    """The arguments exactly as the model sent them: no schema defaults filled in, none of
    the reserved keys the runner adds."""
    output: JSONValue
    """The tool's output (any JSON). ``null`` when the call failed."""
    duration_ms: float
    """Wall time of the call, in milliseconds."""
    success: bool
    """Whether the call succeeded."""
    error: str | None
    """Why it failed; ``null`` on success."""
    iteration: int
    """The iteration (LLM call) that asked for the call."""
    call_id: str = ""
    """The call id: the model's, or ``call_{iteration}_{index}`` when it gave none."""
    error_code: int | None = None
    """The JSON-RPC code of the error class that failed the call (PROTOCOL.md §18); -32011,
    the generic tool error, when the tool raised an exception of its own. ``null`` when the
    call succeeded."""


@attrs.define(slots=True)
class ToolActorContext:
    """The execution environment of an actor: sandbox, resources, and the running history."""

    plan_id: str | None = None
    phase: str | None = None
    sandbox_root: str | None = None
    automation_profile: str | None = None
    resource_bindings: dict[str, JSONValue] = attrs.field(factory=dict)
    project_resources: dict[str, JSONValue] = attrs.field(factory=dict)
    tool_call_history: list[ToolCallRecord] = attrs.field(factory=list)


@attrs.define(slots=True, frozen=True)
class ToolCallContext:
    """What a handler that takes a second parameter learns about its call.

    ``call_id`` and ``iteration`` name the call (a proxy names it on the wire);
    ``arguments`` are what the model sent (the handler's inputs add the reserved keys);
    ``context`` is the run's ``ToolActorContext`` and ``cancel`` the run's
    ``CancelToken``: a sync handler that checks ``cancel.cancelled`` stops when its run
    is cancelled."""

    call_id: str
    tool_name: str
    iteration: int
    arguments: dict[str, JSONValue]
    context: ToolActorContext
    cancel: CancelToken


@attrs.define(slots=True)
class ToolCallRunResult:
    """The outcome of one ``run_tool_loop``.

    ``content`` is the text of the last LLM response (``""`` when it had none).
    ``messages`` is the full conversation, reusable to continue the run later.
    """

    content: str
    tool_call_history: list[ToolCallRecord]
    iterations: int
    terminated_by_limit: bool = False
    cancelled: bool = False
    usage: Usage | None = None
    duration_ms: float = 0.0
    messages: list[Message] = attrs.field(factory=list)
