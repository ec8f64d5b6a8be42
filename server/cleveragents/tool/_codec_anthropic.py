"""The Anthropic messages format: tools, history, and the stream's events.

System messages go apart (``system``); tool results travel as ``tool_result`` blocks in
user messages. Citation deltas carry no answer text and are skipped; an ``error`` event
raises :class:`ProviderStreamError`.

Thinking is kept, because the API needs it back: within a tool loop with thinking on,
the assistant turn before a ``tool_result`` must start with its ``thinking`` and
``redacted_thinking`` blocks, unchanged (their signatures are checked). Each such block
becomes a :class:`Reasoning` piece, keyed by its index in the response: its readable
text (empty for a redacted block) streams as reasoning, and its state is the block
itself, ``{"type": "thinking", "thinking", "signature"}`` or the redacted block as sent.
An assistant message goes back with those blocks first, in order, then its text, then
its ``tool_use`` blocks. Prompt-cache breakpoints are the adapter's: they depend on the
request, not on the format.
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
    plain,
    split_turns,
)
from ._stream import StreamDraft
from ._types import Message, Usage

_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
"""The block types that carry a model's reasoning, sent back as they came."""


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
            case "content_block_stop":
                _block_stop(draft, as_int(event.get("index")))
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
            case _:  # ping and message_stop change nothing
                pass
        return ""

    def events(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        yield {"type": "message_start", "message": {"usage": payload.get("usage")}}
        for index, block in enumerate(payload.get("content") or ()):
            yield {"type": "content_block_start", "index": index, "content_block": block}
            yield {"type": "content_block_stop", "index": index}
        yield {"type": "message_delta", "delta": {"stop_reason": payload.get("stop_reason")}}


CODEC = AnthropicCodec()


def _block_start(draft: StreamDraft, event: Mapping[str, Any]) -> str:
    block = event.get("content_block") or {}
    index = as_int(event.get("index"))
    match block.get("type"):
        case "text":
            return str(block.get("text") or "")
        case "tool_use":
            call = draft.call(index)
            call.id = str(block.get("id") or "")
            call.name = str(block.get("name") or "")
            call.args_obj = block.get("input")
        case "thinking":
            text = str(block.get("thinking") or "")
            piece = draft.think(index, text)
            # Completed by the deltas: the text at content_block_stop, the signature as
            # its delta arrives.
            piece.state = {
                "type": "thinking",
                "thinking": text,
                "signature": str(block.get("signature") or ""),
            }
        case "redacted_thinking":
            draft.think(index).state = plain(block)
        case _:
            pass
    return ""


def _block_delta(draft: StreamDraft, event: Mapping[str, Any]) -> str:
    delta = event.get("delta") or {}
    index = as_int(event.get("index"))
    match delta.get("type"):
        case "text_delta":
            return str(delta.get("text") or "")
        case "input_json_delta":
            draft.call(index).args_text.append(str(delta.get("partial_json") or ""))
        case "thinking_delta":
            draft.think(index, str(delta.get("thinking") or ""))
        case "signature_delta":
            piece = draft.think(index)
            if piece.state is not None:
                piece.state["signature"] = str(piece.state.get("signature") or "") + str(
                    delta.get("signature") or ""
                )
        case _:  # citations and whatever comes next carry no answer text
            pass
    return ""


def _block_stop(draft: StreamDraft, index: int) -> None:
    """A thinking block is whole: its state takes the text its deltas streamed (joined
    once here, not at each delta)."""
    piece = draft.reasoning.get(index)
    if piece is not None and piece.state is not None and piece.state.get("type") == "thinking":
        piece.state["thinking"] = "".join(piece.text)


def _usage(raw: Mapping[str, Any] | None, previous: Usage) -> Usage:
    """Input tokens include cache reads and writes; a missing count keeps the last one.

    The cache counts are the API's ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``; the reasoning count its
    ``output_tokens_details.thinking_tokens`` (part of ``output_tokens``)."""
    if not raw:
        return previous
    inputs = [raw.get(k) for k in _INPUT_KEYS]
    input_tokens = (
        sum(as_int(v) for v in inputs)
        if any(v is not None for v in inputs)
        else previous.input_tokens
    )
    output = raw.get("output_tokens")
    details = raw.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens,
        as_int(output) if output is not None else previous.output_tokens,
        _count(raw.get("cache_read_input_tokens"), previous.cache_read_tokens),
        _count(raw.get("cache_creation_input_tokens"), previous.cache_write_tokens),
        _count(thinking, previous.reasoning_tokens),
    )


def _count(value: Any, previous: int | None) -> int | None:
    return previous if value is None else as_int(value)


def _block_type(state: Mapping[str, Any]) -> str | None:
    """A kept block's ``type``; ``None`` when it is not a string (state read back from a
    transcript may have any shape, and is then not sent)."""
    kind = state.get("type")
    return kind if isinstance(kind, str) else None


def _blocks(message: Message, encode: NameEncoder) -> tuple[str, list[JSONObject]]:
    match message.role:
        case "user":
            return "user", [{"type": "text", "text": message.content}]
        case "assistant":
            # Reasoning first, each block as the model sent it (copied: the adapter may
            # mark the request's blocks, never the conversation's).
            blocks: list[JSONObject] = [
                plain(r.state)
                for r in message.reasoning
                if r.state is not None and _block_type(r.state) in THINKING_BLOCKS
            ]
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
                "content": _result_content(message),
                "is_error": message.is_error,
            }
            return "user", [result]
        case "system":  # split_turns takes these apart; kept for exhaustiveness
            raise AssertionError("system messages are not blocks")
        case _:
            assert_never(message.role)


IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types Anthropic takes; any other medium stays a placeholder in the text."""


def _result_content(message: Message) -> str | list[JSONObject]:
    """A tool result's content: its text, or text and image blocks when it has images
    Anthropic takes (a ``tool_result`` holds both)."""
    images = [m for m in message.media if m.media_type in IMAGE_TYPES]
    if not images:
        return message.content
    blocks: list[JSONObject] = (
        [{"type": "text", "text": message.content}] if message.content else []
    )
    blocks.extend(
        {
            "type": "image",
            "source": {"type": "base64", "media_type": m.media_type, "data": m.data},
        }
        for m in images
    )
    return blocks
