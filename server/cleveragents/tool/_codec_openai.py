"""The OpenAI chat-completions format: tools, history, and ``chat.completion.chunk``s.

Also the format of the OpenAI-compatible servers (vLLM, Ollama, llama.cpp), some of
which send tool arguments as an object or omit call ids; both are taken.
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
        return ProviderMessages(None, [_message(m, encode) for m in messages])

    def feed(self, draft: StreamDraft, chunk: Mapping[str, Any]) -> str:
        usage = chunk.get("usage")
        if usage:
            draft.usage = Usage(
                as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens"))
            )
        text: list[str] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:  # we never ask for n > 1
                continue
            if choice.get("finish_reason"):
                draft.stop = choice["finish_reason"]
            delta = choice.get("delta") or {}
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


def _message(message: Message, encode: NameEncoder) -> JSONObject:
    match message.role:
        case "system" | "user":
            return {"role": message.role, "content": message.content}
        case "assistant":
            if not message.tool_calls:
                return {"role": "assistant", "content": message.content}
            return {
                "role": "assistant",
                "content": message.content or None,
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
