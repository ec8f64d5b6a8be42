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
    from ._content import Media

JSONValue: TypeAlias = Any
"""Any JSON value. Kept as ``Any`` on purpose: tool outputs are arbitrary JSON."""

Role = Literal["system", "user", "assistant", "tool"]

RESERVED_INPUT_KEYS: frozenset[str] = frozenset({"sandbox_root", "resource_bindings"})
"""Inputs that always come from the ``ToolActorContext``, never from the model."""


def _add_counts(a: int | None, b: int | None) -> int | None:
    """Two optional token counts summed; unknown only when both are."""
    if a is None:
        return b
    return a if b is None else a + b


@attrs.define(slots=True)
class Usage:
    """Token usage of one LLM call, or the sum over a run.

    ``input_tokens`` counts the whole request, cached parts included; the optional
    counts say what the provider reported of it (``None``: not reported):
    ``cache_read_tokens`` were read from the provider's prompt cache,
    ``cache_write_tokens`` were written to it, and ``reasoning_tokens`` (part of
    ``output_tokens``) were spent reasoning.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            _add_counts(self.cache_read_tokens, other.cache_read_tokens),
            _add_counts(self.cache_write_tokens, other.cache_write_tokens),
            _add_counts(self.reasoning_tokens, other.reasoning_tokens),
        )


ProviderState: TypeAlias = dict[str, JSONValue]
"""Opaque state a provider attached to its response and needs back, unchanged, in the
next request to the same model (a signature, an encrypted reasoning item). Not secret,
but meaningless to anyone else: never shown, never sent to another model."""


@attrs.define(slots=True)
class Reasoning:
    """One piece of a model's reasoning before its answer.

    ``text`` is what a person may read (a thinking block, a reasoning summary; possibly
    empty, when the provider keeps it encrypted); ``state`` is the provider's own form
    of it, to be sent back as it came (``None`` when there is nothing to send back).
    """

    text: str = ""
    state: ProviderState | None = None


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
    state: ProviderState | None = None
    """Provider state attached to this call (Gemini's thought signature), sent back with
    it to the same model."""


@attrs.define(slots=True)
class Message:
    """One conversation message in neutral form.

    ``tool_calls`` is set on assistant messages that ask for tools; ``tool_call_id`` and
    ``name`` on tool-result messages; ``is_error`` marks a failed tool result.

    An assistant message also keeps what its model reasoned (``reasoning``) and any
    provider state of the message itself (``state``), with the model that produced it
    (``origin``, e.g. ``anthropic:claude-sonnet-4-5``). The state goes back only to
    that model (see :meth:`ToolCallRouter.messages`).
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = attrs.field(factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    reasoning: list[Reasoning] = attrs.field(factory=list)
    state: ProviderState | None = None
    origin: str | None = None
    media: list[Media] = attrs.field(factory=list)
    """A tool result's images and audio (``content`` names each with a placeholder):
    sent by the codecs whose providers take them (see ``_content``)."""

    def carries_state(self) -> bool:
        """Whether the message holds reasoning or provider state beyond text and calls."""
        return bool(
            self.reasoning
            or self.state is not None
            or any(call.state is not None for call in self.tool_calls)
        )


@attrs.define(slots=True)
class LLMResponse:
    """What one LLM call produced: text, tool calls, and usage when the provider reports it."""

    content: str = ""
    tool_calls: list[ToolCall] = attrs.field(factory=list)
    usage: Usage | None = None
    stop_reason: str | None = None
    reasoning: list[Reasoning] = attrs.field(factory=list)
    """What the model reasoned, in order, with the state its provider needs back."""
    state: ProviderState | None = None
    """Provider state of the message itself (Gemini's signature on a text part)."""
    origin: str | None = None
    """The model that answered (``provider:model``), set by the adapter."""


@attrs.define(slots=True, frozen=True)
class ToolSchema:
    """A tool as the model sees it: the reserved inputs are already removed."""

    name: str
    description: str
    parameters: Mapping[str, JSONValue]


@attrs.frozen(slots=True)
class CallSettings:
    """Settings for one model call alone, over the model's own (its spec's): what an MCP
    server's sampling request asks for. ``None`` or empty: the model's own setting.

    Advisory where a provider cannot take one (docs/models.md says which): its adapter
    leaves it out rather than fail the call."""

    max_tokens: int | None = None
    """Tokens the answer may take at most; with the spec's own ``maxTokens`` too, the
    smaller of the two (the user's cap stands)."""
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    """Stop sequences: the answer ends before the first of them."""


def ignore_reasoning(text: str) -> None:
    """The default ``on_reasoning``: nobody reads the model's reasoning."""


@attrs.define(slots=True)
class LLMRequest:
    """Everything an ``LLMCaller`` needs for one call.

    ``messages`` is the run's live history (do not mutate it). ``on_delta`` reports
    streamed text as it arrives, ``on_reasoning`` streamed reasoning; ``cancel`` is set
    when the run is being cancelled.
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSchema]
    iteration: int
    context: ToolActorContext
    cancel: CancelToken
    on_delta: Callable[[str], None]
    on_reasoning: Callable[[str], None] = ignore_reasoning
    purpose: str = "turn"
    """``"turn"``: an iteration of the run; ``"summary"``: the summary of a compaction
    (no tools; the answer replaces older messages); ``"sampling"``: an MCP server's
    sampling request (no tools; the answer goes to the server, not the run)."""
    settings: CallSettings | None = None
    """This call's own settings over the model's (``None``: the model's alone)."""


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
    limit_reason: str | None = None
    """Which limit ended the run when ``terminated_by_limit``: ``"iterations"``,
    ``"toolCalls"``, ``"deadline"`` or ``"tokens"`` (see ``UsageLimits``)."""
