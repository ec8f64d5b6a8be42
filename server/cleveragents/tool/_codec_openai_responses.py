"""The OpenAI Responses format (``openai_responses``): function tools, input items, and
the typed events of a streamed response.

A history becomes input items: user and system messages as they are, an assistant's
text as a message item, each tool call as a ``function_call`` item and each result as a
``function_call_output``. A reasoning model's answer also holds ``reasoning`` items;
each is kept whole as the state of a reasoning piece (its summary is the readable
text) and sent back, before the items that followed it, exactly as it came. The API
pairs them by id: a ``function_call`` sent with its ``fc_`` id needs the reasoning item
that preceded it, and a reasoning item needs the item that followed it, so the
assistant message's state keeps the ids of its output items in order, and each call's
state its item id.

Requests go with ``store: false`` (the adapter's), so a reasoning item can only go back
with its ``encrypted_content``: one without it (reasoning not asked for, so the include
was not sent) is left out, and the items that followed it go without their ids, which
the API accepts. Another model's state never reaches here (the router leaves it out).

Deliberately does not know the request's other fields (``store``, ``include``,
``reasoning``): those are the adapter's.
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
    dump,
    plain,
)
from ._stream import StreamDraft
from ._types import Message, ToolCall, Usage

_OUTPUT = "output"
"""Message state: the ids of the response's output items, in order."""
_TEXTS = "texts"
"""Message state: each message item's text by its id (an answer may come in several)."""
_ID = "id"
"""Call state: the ``function_call`` item's id (``fc_...``), beside its ``call_id``."""


class OpenAIResponsesCodec:
    """Input items in, typed stream events out; system messages stay in the input."""

    def name_tokens(self, tokens: list[str]) -> list[str]:
        return tokens

    def tools(self, declarations: Sequence[ToolDeclaration]) -> list[JSONObject]:
        # strict defaults to true in this API, and a strict schema must close every
        # object and require every property: our tools' schemas are sent as they are.
        return [
            {
                "type": "function",
                "name": d.name,
                "description": d.description,
                "parameters": d.parameters,
                "strict": False,
            }
            for d in declarations
        ]

    def messages(self, messages: Sequence[Message], encode: NameEncoder) -> ProviderMessages:
        items: list[JSONObject] = []
        for message in messages:
            match message.role:
                case "system" | "user":
                    items.append({"role": message.role, "content": message.content})
                case "assistant":
                    items.extend(_assistant_items(message, encode))
                case "tool":
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": call_id(message),
                            "output": _output(message),
                        }
                    )
                case _:
                    assert_never(message.role)
        return ProviderMessages(None, items)

    def feed(self, draft: StreamDraft, chunk: Mapping[str, Any]) -> str:
        kind = chunk.get("type")
        index = chunk.get("output_index")
        key = index if isinstance(index, int) else 0
        delta = chunk.get("delta")
        match kind:
            case "response.output_text.delta" | "response.refusal.delta":
                return delta if isinstance(delta, str) else ""
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                draft.think(key, delta if isinstance(delta, str) else "")
            case "response.reasoning_summary_part.added":
                if as_int(chunk.get("summary_index")) > 0:  # parts read as paragraphs
                    draft.think(key, "\n\n")
            case "response.output_item.added":
                item = chunk.get("item") or {}
                if item.get("type") == "function_call":
                    _start_call(draft, key, item)
            case "response.function_call_arguments.delta":
                if isinstance(delta, str):
                    draft.call(key).args_text.append(delta)
            case "response.output_item.done":
                _item_done(draft, key, chunk.get("item") or {})
            case "response.completed" | "response.incomplete":
                _finish(draft, chunk.get("response") or {})
            case "response.failed":
                error = (chunk.get("response") or {}).get("error") or {}
                raise ProviderStreamError(
                    str(error.get("code") or "response.failed"), str(error.get("message") or "")
                )
            case "error":
                raise ProviderStreamError(
                    str(chunk.get("code") or "error"), str(chunk.get("message") or "")
                )
        return ""

    def events(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        chunks: list[Mapping[str, Any]] = []
        for index, item in enumerate(payload.get("output") or ()):
            if item.get("type") == "message":
                text = _message_text(item)
                if text:
                    chunks.append(
                        {"type": "response.output_text.delta", "output_index": index, "delta": text}
                    )
            elif item.get("type") == "reasoning":
                for number, summary in enumerate(item.get("summary") or ()):
                    start = "response.reasoning_summary_part.added"
                    chunks.append({"type": start, "output_index": index, "summary_index": number})
                    delta = "response.reasoning_summary_text.delta"
                    text = summary.get("text") or ""
                    chunks.append({"type": delta, "output_index": index, "delta": text})
            chunks.append(
                {"type": "response.output_item.done", "output_index": index, "item": item}
            )
        ends = {"failed": "response.failed", "incomplete": "response.incomplete"}
        end = ends.get(str(payload.get("status")), "response.completed")
        chunks.append({"type": end, "response": payload})
        return chunks


CODEC = OpenAIResponsesCodec()


# -- history -------------------------------------------------------------------------------


def _assistant_items(message: Message, encode: NameEncoder) -> list[JSONObject]:
    """An assistant message as the output items it came as, in their order.

    An item goes with its id only when the reasoning item before it goes back too: the
    API requires a ``function_call``'s reasoning item once the call names its id, and a
    reasoning item's following item by id. Without the order (no reasoning came), the
    text goes first, then the calls, all without ids.
    """
    state = message.state or {}
    order = state.get(_OUTPUT)
    refs = [ref for ref in order if isinstance(ref, str)] if isinstance(order, list) else []
    found = state.get(_TEXTS)
    texts = found if isinstance(found, dict) else {}
    reasoning = {
        r.state[_ID]: r.state
        for r in message.reasoning
        if r.state is not None
        and r.state.get("type") == "reasoning"
        and isinstance(r.state.get(_ID), str)
    }
    calls = {
        c.state[_ID]: c
        for c in message.tool_calls
        if c.state is not None and isinstance(c.state.get(_ID), str) and c.state[_ID]
    }
    items: list[JSONObject] = []
    sent: set[str] = set()
    linked = False  # whether the reasoning item before this one went back
    for ref in refs:
        if ref in reasoning:
            item = reasoning[ref]
            linked = isinstance(item.get("encrypted_content"), str)
            if linked:
                items.append(plain(item))
        elif ref in calls:
            items.append(_call_item(calls[ref], encode, ref if linked else None))
            sent.add(calls[ref].id)
        elif isinstance(texts.get(ref), str):
            items.append(_text_item(texts[ref], ref if linked else None))
        else:  # an item that does not go back (reasoning without its content)
            linked = False
    if message.content and not texts:
        items.insert(0, _text_item(message.content, None))
    items.extend(_call_item(c, encode, None) for c in message.tool_calls if c.id not in sent)
    return items


def _text_item(text: str, item_id: str | None) -> JSONObject:
    if item_id is None:
        return {"role": "assistant", "content": text}
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _call_item(call: ToolCall, encode: NameEncoder, item_id: str | None) -> JSONObject:
    item: JSONObject = {
        "type": "function_call",
        "call_id": call.id,
        "name": encode(call.name),
        "arguments": dump(call.arguments),
    }
    if item_id is not None:
        item["id"] = item_id
    return item


# -- stream --------------------------------------------------------------------------------


def _start_call(draft: StreamDraft, key: int, item: Mapping[str, Any]) -> None:
    call = draft.call(key)
    if isinstance(item.get("call_id"), str) and not call.id:
        call.id = item["call_id"]
    if isinstance(item.get("name"), str) and not call.name:
        call.name = item["name"]


def _item_done(draft: StreamDraft, key: int, item: Mapping[str, Any]) -> None:
    """A finished output item: its place in the order, and what only the whole item
    says (a reasoning item's encrypted content, a call's item id)."""
    if draft.state is None:
        draft.state = {_OUTPUT: []}
    order = draft.state.setdefault(_OUTPUT, [])
    item_id = item.get(_ID)
    if isinstance(item_id, str) and isinstance(order, list):
        order.append(item_id)
    match item.get("type"):
        case "reasoning":
            # Only an item with its encrypted content can go back (store is false).
            keep = isinstance(item.get("encrypted_content"), str)
            parts = [str(s.get("text") or "") for s in item.get("summary") or ()]
            summary = "\n\n".join(part for part in parts if part)
            if key not in draft.reasoning and not keep and not summary:
                return  # nothing to read, nothing to send back
            piece = draft.think(key)
            if not piece.text and summary:  # a stream that sent no summary deltas
                draft.think(key, summary)
            piece.state = plain(item) if keep else None
        case "function_call":
            _start_call(draft, key, item)
            call = draft.call(key)
            if not call.args_text and isinstance(item.get("arguments"), str):
                call.args_text.append(item["arguments"])
            if isinstance(item_id, str):
                call.state = {_ID: item_id}
        case "message":
            texts = draft.state.setdefault(_TEXTS, {})
            if isinstance(item_id, str) and isinstance(texts, dict):
                texts[item_id] = _message_text(item)


def _message_text(item: Mapping[str, Any]) -> str:
    """The text of a message item: its output text and refusal parts."""
    parts = item.get("content") or ()
    return "".join(str(p.get("text") or p.get("refusal") or "") for p in parts)


def _finish(draft: StreamDraft, response: Mapping[str, Any]) -> None:
    """The response's end: its usage and status. The ids are kept only when there is
    reasoning to pair them with; else the answer carries no state at all."""
    draft.usage = _usage(response.get("usage") or {})
    details = response.get("incomplete_details") or {}
    draft.stop = str(details.get("reason") or response.get("status") or "completed")
    if not any(piece.state is not None for piece in draft.reasoning.values()):
        draft.state = None
        for call in draft.calls.values():
            call.state = None


def _usage(usage: Mapping[str, Any]) -> Usage:
    inputs = usage.get("input_tokens_details") or {}
    outputs = usage.get("output_tokens_details") or {}
    return Usage(
        as_int(usage.get("input_tokens")),
        as_int(usage.get("output_tokens")),
        cache_read_tokens=_count(inputs.get("cached_tokens")),
        cache_write_tokens=_count(inputs.get("cache_write_tokens")),
        reasoning_tokens=_count(outputs.get("reasoning_tokens")),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _output(message: Message) -> str | list[JSONObject]:
    """A function call's output: its text, or ``input_text`` and ``input_image`` items
    when it has images (the Responses API takes them in a function call's output)."""
    images = [m for m in message.media if m.kind == "image"]
    if not images:
        return message.content
    items: list[JSONObject] = [{"type": "input_text", "text": message.content}]
    items.extend({"type": "input_image", "image_url": m.data_url} for m in images)
    return items
