"""The OpenAI chat-completions format: tools, history, and ``chat.completion.chunk``s.

Also the format of the OpenAI-compatible servers (vLLM, Ollama, llama.cpp, DeepSeek),
some of which send tool arguments as an object or omit call ids; both are taken.

Reasoning: OpenAI's own chat API streams none, but compatible servers stream it beside
the answer, as ``delta.reasoning_content`` (DeepSeek, llama.cpp, older vLLM) or
``delta.reasoning`` (vLLM since late 2025, OpenRouter, Ollama). It is kept as one
reasoning piece whose state names the field it came in, and sent back in that field on
the assistant message, since some servers require it within a tool loop (DeepSeek's
thinking mode answers 400 without it). The router leaves it out for another model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, assert_never

from ._codec import (
    JSONObject,
    NameEncoder,
    ProviderMessages,
    ToolDeclaration,
    as_int,
    call_id,
    dump,
)
from ._stream import StreamDraft
from ._types import Message, Usage

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where compatible servers put reasoning, in the order read: a server that fills both
(vLLM's compatibility mode) sends the same text twice."""
_FIELD = "field"
"""The key of a reasoning piece's state: the field its text came in, and goes back in."""


class OpenAICodec:
    """System messages stay in the history; tool results are ``tool`` messages."""

    def name_tokens(self, tokens: list[str]) -> list[str]:
        return tokens

    def tools(self, declarations: Sequence[ToolDeclaration]) -> list[JSONObject]:
        return [
            {
                "type": "function",
                "function": {
                    "name": d.name,
                    "description": d.description,
                    "parameters": d.parameters,
                },
            }
            for d in declarations
        ]

    def messages(self, messages: Sequence[Message], encode: NameEncoder) -> ProviderMessages:
        out = [_message(m, encode) for m in messages]
        if any(m.media for m in messages):
            out = _with_images(messages, out)
        return ProviderMessages(None, out)

    def feed(self, draft: StreamDraft, chunk: Mapping[str, Any]) -> str:
        usage = chunk.get("usage")
        if usage:
            draft.usage = _usage(usage)
        text: list[str] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:  # we never ask for n > 1
                continue
            if choice.get("finish_reason"):
                draft.stop = choice["finish_reason"]
            delta = choice.get("delta") or {}
            _feed_reasoning(draft, delta)
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for position, piece in enumerate(delta.get("tool_calls") or ()):
                _feed_call(draft, position, piece)
        return "".join(text)

    def events(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        choices = []
        for choice in payload.get("choices") or ():
            message = dict(choice.get("message") or {})
            message["tool_calls"] = [
                {**call, "index": i} for i, call in enumerate(message.get("tool_calls") or ())
            ]
            choices.append({**choice, "delta": message})
        return [{"choices": choices, "usage": payload.get("usage")}]


CODEC = OpenAICodec()


def _feed_call(draft: StreamDraft, position: int, piece: Mapping[str, Any]) -> None:
    index = piece.get("index")
    call = draft.call(index if isinstance(index, int) else position)
    if piece.get("id") and not call.id:
        call.id = piece["id"]
    function = piece.get("function") or {}
    if function.get("name"):
        call.name += function["name"]
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        call.args_text.append(arguments)
    elif arguments is not None:  # a few compatible servers send an object
        call.args_obj = arguments


def _usage(usage: Mapping[str, Any]) -> Usage:
    """Usage with the optional counts where the server gives them: OpenAI's details
    objects, else DeepSeek's ``prompt_cache_hit_tokens``."""
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    cached = _count(prompt.get("cached_tokens"))
    if cached is None:
        cached = _count(usage.get("prompt_cache_hit_tokens"))
    return Usage(
        as_int(usage.get("prompt_tokens")),
        as_int(usage.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=_count(completion.get("reasoning_tokens")),
    )


def _count(value: Any) -> int | None:
    """A token count the server reported, or ``None`` when it reported none."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _feed_reasoning(draft: StreamDraft, delta: Mapping[str, Any]) -> None:
    """A delta's reasoning, from the first field of :data:`REASONING_FIELDS` it fills
    (with a string, even an empty one: the field then goes back, as DeepSeek needs)."""
    for field in REASONING_FIELDS:
        text = delta.get(field)
        if isinstance(text, str):
            piece = draft.think(0, text)
            if piece.state is None:
                piece.state = {_FIELD: field}
            return


def _reasoning_back(message: Message) -> JSONObject:
    """The reasoning field of an assistant message as its server sent it, if it did; the
    router has left out another model's (and turned it into text)."""
    fields = [r.state.get(_FIELD) for r in message.reasoning if r.state]
    field = next((f for f in fields if f in REASONING_FIELDS), None)
    if field is None:
        return {}
    return {field: "".join(r.text for r in message.reasoning if r.state)}


def _message(message: Message, encode: NameEncoder) -> JSONObject:
    match message.role:
        case "system" | "user":
            return {"role": message.role, "content": message.content}
        case "assistant":
            thought = _reasoning_back(message)
            if not message.tool_calls:
                return {"role": "assistant", "content": message.content, **thought}
            return {
                "role": "assistant",
                "content": message.content or None,
                **thought,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": encode(call.name), "arguments": dump(call.arguments)},
                    }
                    for call in message.tool_calls
                ],
            }
        case "tool":
            return {"role": "tool", "tool_call_id": call_id(message), "content": message.content}
        case _:
            assert_never(message.role)


def _with_images(messages: Sequence[Message], out: list[JSONObject]) -> list[JSONObject]:
    """Chat Completions takes no image in a tool message: the images of a turn's tool
    results go in one user message right after that turn's last tool message (a message
    between two tool messages of one turn would break their pairing), each after a line
    naming its call."""
    merged: list[JSONObject] = []
    pending: list[JSONObject] = []
    for message, wire in zip(messages, out, strict=True):
        if message.role != "tool" and pending:
            merged.append({"role": "user", "content": pending})
            pending = []
        merged.append(wire)
        images = [m for m in message.media if m.kind == "image"] if message.role == "tool" else []
        if images:
            pending.append({"type": "text", "text": f"Images from tool call {call_id(message)}:"})
            pending.extend({"type": "image_url", "image_url": {"url": m.data_url}} for m in images)
    if pending:
        merged.append({"role": "user", "content": pending})
    return merged
