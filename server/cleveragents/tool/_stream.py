"""Collecting one model call's streamed chunks into an ``LLMResponse``.

Owns the provider-neutral state of a call while it streams (text so far, reasoning,
tool-call drafts, provider state, usage, stop reason) and the final parsing of tool-call
arguments. A codec's
``feed`` writes each chunk into a :class:`StreamDraft`; this module knows no provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ._types import LLMResponse, ProviderState, Reasoning, ToolCall, Usage

__all__ = ["StreamAccumulator", "StreamDraft"]

Feed = Callable[["StreamDraft", Mapping[str, Any]], str]


@attrs.define(slots=True)
class CallDraft:
    """One tool call while its pieces arrive. ``args_obj`` holds arguments a provider
    sent already parsed; streamed ``args_text`` wins over it when present."""

    id: str = ""
    name: str = ""
    args_text: list[str] = attrs.field(factory=list)
    args_obj: Any = None
    state: ProviderState | None = None

    def finish(self, decode: Callable[[str], str], default_id: str) -> ToolCall:
        name = decode(self.name)
        call = ToolCall(id=self.id or default_id, name=name, state=self.state)
        text = "".join(self.args_text)
        if text.strip():
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                call.parse_error = (
                    f"the arguments of {name} are not valid JSON: {exc.msg} "
                    f"at line {exc.lineno} column {exc.colno}"
                )
                return call
        elif self.args_obj is not None:
            value = self.args_obj
        else:
            value = {}
        if isinstance(value, dict):
            call.arguments = value
        else:
            call.parse_error = (
                f"the arguments of {name} must be a JSON object, not {type(value).__name__}"
            )
        return call


@attrs.define(slots=True)
class ReasoningDraft:
    """One piece of reasoning while it arrives: its readable text so far, and the
    provider's state of it (set or completed by later chunks)."""

    text: list[str] = attrs.field(factory=list)
    state: ProviderState | None = None

    def finish(self) -> Reasoning:
        return Reasoning("".join(self.text), self.state)


@attrs.define(slots=True)
class StreamDraft:
    """What a call's chunks have said so far; codecs write here, keyed as they like.

    ``state`` is provider state of the message itself; ``said`` holds reasoning text
    not yet reported (the accumulator hands it on after each chunk)."""

    calls: dict[int, CallDraft] = attrs.field(factory=dict)
    usage: Usage | None = None
    stop: str | None = None
    reasoning: dict[int, ReasoningDraft] = attrs.field(factory=dict)
    state: ProviderState | None = None
    said: list[str] = attrs.field(factory=list)

    def call(self, key: int) -> CallDraft:
        """The draft of call ``key``, started on first use."""
        draft = self.calls.get(key)
        if draft is None:
            draft = self.calls[key] = CallDraft()
        return draft

    def think(self, key: int, text: str = "") -> ReasoningDraft:
        """The draft of reasoning piece ``key``, started on first use; ``text`` is
        appended to it and reported as streamed reasoning."""
        draft = self.reasoning.get(key)
        if draft is None:
            draft = self.reasoning[key] = ReasoningDraft()
        if text:
            draft.text.append(text)
            self.said.append(text)
        return draft


class StreamAccumulator:
    """Collects one call's streamed chunks (as dicts) into an :class:`LLMResponse`.

    ``feed`` takes one chunk in the router's format (an OpenAI
    ``chat.completion.chunk``, an Anthropic stream event, a Gemini
    ``GenerateContentResponse``) and returns the text it carried (``""`` if none) so
    the adapter can report it at once. Tool-call arguments may arrive split anywhere,
    mid-JSON included; they are parsed only in :meth:`result`. Get one from
    :meth:`ToolCallRouter.stream`.
    """

    __slots__ = ("_decode", "_draft", "_feed", "_iteration", "_text", "origin")

    def __init__(
        self,
        feed: Feed,
        decode: Callable[[str], str],
        iteration: int,
        origin: str | None = None,
    ) -> None:
        self._feed = feed
        self._decode = decode
        self._iteration = iteration
        self._text: list[str] = []
        self._draft = StreamDraft()
        self.origin = origin

    def feed(self, chunk: Mapping[str, Any]) -> str:
        """Take one chunk; the answer text it carried. Raises
        :class:`ProviderStreamError` for an error event."""
        text = self._feed(self._draft, chunk)
        if text:
            self._text.append(text)
        return text

    def take_reasoning(self) -> str:
        """The reasoning text the chunks fed since the last call carried (``""`` if
        none), to report as it arrives."""
        said = self._draft.said
        if not said:
            return ""
        text = "".join(said)
        said.clear()
        return text

    def result(self) -> LLMResponse:
        """The response so far; calls without a provider id get
        ``call_{iteration}_{index}``."""
        draft = self._draft
        calls = [
            draft.calls[key].finish(self._decode, f"call_{self._iteration}_{index}")
            for index, key in enumerate(sorted(draft.calls))
        ]
        return LLMResponse(
            content="".join(self._text),
            tool_calls=calls,
            usage=draft.usage,
            stop_reason=draft.stop,
            reasoning=[draft.reasoning[key].finish() for key in sorted(draft.reasoning)],
            state=draft.state,
            origin=self.origin,
        )
