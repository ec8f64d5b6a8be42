"""The Anthropic messages format: tools, history, and the stream's events.

System messages go apart (``system``); tool results travel as ``tool_result`` blocks in
user messages. Thinking, signature and citation deltas carry no answer text and are
skipped; an ``error`` event raises :class:`ProviderStreamError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, assert_never

from ._codec import (
    JSONObject,
    NameEncoder,
    ProviderMessages,
    ProviderStreamError,
    ToolDeclaration,
    as_int,
    call_id,
    split_turns,
)
from ._stream import StreamDraft
from ._types import Message, Usage

_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class AnthropicCodec:
    """Consecutive same-role messages merge; empty assistant turns are dropped."""

    def name_tokens(self, tokens: list[str]) -> list[str]:
        return tokens

    def tools(self, declarations: Sequence[ToolDeclaration]) -> list[JSONObject]:
        return [
            {"name": d.name, "description": d.description, "input_schema": d.parameters}
            for d in declarations
        ]

    def messages(self, messages: Sequence[Message], encode: NameEncoder) -> ProviderMessages:
        return split_turns(messages, lambda m, _names: _blocks(m, encode), "content")

    def feed(self, draft: StreamDraft, event: Mapping[str, Any]) -> str:
        match event.get("type"):
            case "message_start":
                message = event.get("message") or {}
                draft.usage = _usage(message.get("usage"), Usage())
                if message.get("stop_reason"):
                    draft.stop = message["stop_reason"]
            case "content_block_start":
                return _block_start(draft, event)
            case "content_block_delta":
                return _block_delta(draft, event)
            case "message_delta":
                if (event.get("delta") or {}).get("stop_reason"):
                    draft.stop = event["delta"]["stop_reason"]
                if event.get("usage"):
                    draft.usage = _usage(event["usage"], draft.usage or Usage())
            case "error":
                error = event.get("error") or {}
                raise ProviderStreamError(
                    str(error.get("type") or "an error"), str(error.get("message") or "")
                )
            case _:  # ping, content_block_stop and message_stop change nothing
                pass
        return ""

    def events(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        yield {"type": "message_start", "message": {"usage": payload.get("usage")}}
        for index, block in enumerate(payload.get("content") or ()):
            yield {"type": "content_block_start", "index": index, "content_block": block}
        yield {"type": "message_delta", "delta": {"stop_reason": payload.get("stop_reason")}}


CODEC = AnthropicCodec()


def _block_start(draft: StreamDraft, event: Mapping[str, Any]) -> str:
    block = event.get("content_block") or {}
    if block.get("type") == "text":
        return str(block.get("text") or "")
    if block.get("type") == "tool_use":
        call = draft.call(as_int(event.get("index")))
        call.id = str(block.get("id") or "")
        call.name = str(block.get("name") or "")
        call.args_obj = block.get("input")
    return ""


def _block_delta(draft: StreamDraft, event: Mapping[str, Any]) -> str:
    delta = event.get("delta") or {}
    if delta.get("type") == "text_delta":
        return str(delta.get("text") or "")
    if delta.get("type") == "input_json_delta":
        call = draft.call(as_int(event.get("index")))
        call.args_text.append(str(delta.get("partial_json") or ""))
    return ""


def _usage(raw: Mapping[str, Any] | None, previous: Usage) -> Usage:
    """Input tokens include cache reads and writes; a missing count keeps the last one."""
    if not raw:
        return previous
    inputs = [raw.get(k) for k in _INPUT_KEYS]
    input_tokens = (
        sum(as_int(v) for v in inputs)
        if any(v is not None for v in inputs)
        else previous.input_tokens
    )
    output = raw.get("output_tokens")
    return Usage(input_tokens, as_int(output) if output is not None else previous.output_tokens)


def _blocks(message: Message, encode: NameEncoder) -> tuple[str, list[JSONObject]]:
    match message.role:
        case "user":
            return "user", [{"type": "text", "text": message.content}]
        case "assistant":
            blocks: list[JSONObject] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": encode(call.name),
                    "input": dict(call.arguments),
                }
                for call in message.tool_calls
            )
            return "assistant", blocks
        case "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": call_id(message),
                "content": message.content,
                "is_error": message.is_error,
            }
            return "user", [result]
        case "system":  # split_turns takes these apart; kept for exhaustiveness
            raise AssertionError("system messages are not blocks")
        case _:
            assert_never(message.role)
