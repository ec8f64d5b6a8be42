"""The Gemini ``generateContent`` format: tools, history, and streamed responses.

Owns what Gemini asks of tools beyond the shared encoding:

- a function name starts with a letter or ``_``, so a name that would start with a
  digit or ``-`` gets the :data:`NAME_LEAD` (``9lives`` -> ``_-x9lives``);
- a parameter schema is cleaned of what Gemini refuses (:func:`gemini_schema`).

Gemini's responses carry no call id (newer models may send one, which is kept), so
calls are numbered across the chunks of one stream. Thought parts (``thought: true``,
the summaries ``include_thoughts`` asks for) stream as reasoning, never as answer text.

Thought signatures (ai.google.dev/gemini-api/docs/thought-signatures) go back exactly
where they came: Gemini 3 refuses a history whose function calls of the current turn
lack theirs (HTTP 400), and recommends sending back those on other parts. So:

- a ``functionCall`` part's signature is its call's state (``{"thoughtSignature": s}``)
  and is sent back on that call's part (for parallel calls only the first has one);
- a signed text or thought part cannot be a part of its own in the neutral message,
  whose text is one string, so the message's (or the reasoning piece's) state says
  where in the text it lies: ``{"signedParts": [{"thoughtSignature": s, "length": n,
  "after": m}]}``, its ``n`` characters followed by ``m`` more. It is sent back as a
  part of its own, never merged with unsigned text, as the docs ask (when streaming,
  the signature usually comes on an empty text part at the end);
- thought text without a signature is not sent back: the API reads nothing from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, assert_never

from ._codec import (
    NAME_LEAD,
    JSONObject,
    NameEncoder,
    ProviderMessages,
    ToolDeclaration,
    as_int,
    call_id,
    plain,
    split_turns,
)
from ._stream import StreamDraft
from ._types import Message, ProviderState, Usage

_DROPPED_KEYWORDS = frozenset({"additionalProperties", "format", "definitions"})
"""Refused by Gemini, or meaningless once references are inlined. ``format`` goes
whole: the runner still validates arguments against the tool's own schema."""
_ONE_SUBSCHEMA = ("items", "not", "contains", "if", "then", "else", "propertyNames")
_SUBSCHEMA_LISTS = ("allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties")
_UNIONS = ("anyOf", "oneOf")
_NULL = {"type": "null"}


class GeminiCodec:
    """Function declarations in one tool; ``model`` role; results by tool name."""

    def name_tokens(self, tokens: list[str]) -> list[str]:
        first = tokens[0][0]
        return tokens if first.isalpha() or first == "_" else [NAME_LEAD, *tokens]

    def tools(self, declarations: Sequence[ToolDeclaration]) -> list[JSONObject]:
        if not declarations:
            return []
        functions = [
            {
                "name": d.name,
                "description": d.description,
                "parametersJsonSchema": gemini_schema(d.parameters),
            }
            for d in declarations
        ]
        return [{"functionDeclarations": functions}]

    def messages(self, messages: Sequence[Message], encode: NameEncoder) -> ProviderMessages:
        return split_turns(messages, lambda m, names: _parts(m, names, encode), "parts")

    def feed(self, draft: StreamDraft, chunk: Mapping[str, Any]) -> str:
        meta = chunk.get("usageMetadata")
        if meta:
            thoughts = _count(meta, "thoughtsTokenCount")
            draft.usage = Usage(
                as_int(meta.get("promptTokenCount")),
                as_int(meta.get("candidatesTokenCount")) + (thoughts or 0),
                cache_read_tokens=_count(meta, "cachedContentTokenCount"),
                reasoning_tokens=thoughts,
            )
        text: list[str] = []
        for candidate in (chunk.get("candidates") or ())[:1]:
            if candidate.get("finishReason"):
                draft.stop = candidate["finishReason"]
            for part in (candidate.get("content") or {}).get("parts") or ():
                signature = part.get(_SIGNATURE)
                signature = signature if isinstance(signature, str) and signature else None
                said = part.get("text") if isinstance(part.get("text"), str) else ""
                if "functionCall" in part:
                    function = part["functionCall"] or {}
                    call = draft.call(len(draft.calls))
                    call.id = str(function.get("id") or "")
                    call.name = str(function.get("name") or "")
                    call.args_obj = function.get("args") or {}
                    if signature is not None:
                        call.state = {_SIGNATURE: signature}
                elif part.get("thought"):
                    if said or signature is not None or 0 in draft.reasoning:
                        piece = draft.think(0, said)
                        piece.state = _signed(piece.state, said, signature)
                elif "text" in part:
                    text.append(said)
                    draft.state = _signed(draft.state, said, signature)
        return "".join(text)

    def events(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        return [payload]


CODEC = GeminiCodec()


def _parts(
    message: Message, names: Mapping[str, str], encode: NameEncoder
) -> tuple[str, list[JSONObject]]:
    match message.role:
        case "user":
            return "user", [{"text": message.content}]
        case "assistant":
            parts: list[JSONObject] = []
            for piece in message.reasoning:
                if piece.state is not None:  # unsigned thought text is not sent back
                    parts.extend(_text_parts(piece.text, piece.state, thought=True))
            parts.extend(_text_parts(message.content, message.state))
            for call in message.tool_calls:
                part: JSONObject = {
                    "functionCall": {"name": encode(call.name), "args": dict(call.arguments)}
                }
                signature = (call.state or {}).get(_SIGNATURE)
                if isinstance(signature, str):
                    part[_SIGNATURE] = signature
                parts.append(part)
            return "model", parts
        case "tool":
            name = message.name or names.get(call_id(message))
            if not name:
                raise ValueError(
                    f"tool result {message.tool_call_id!r} names no tool; "
                    "Gemini needs the tool name with each result"
                )
            key = "error" if message.is_error else "output"
            response: JSONObject = {"name": encode(name), "response": {key: message.content}}
            if message.media:  # Gemini 3 takes media inside the functionResponse
                response["parts"] = [
                    {"inlineData": {"mimeType": m.media_type, "data": m.data}}
                    for m in message.media
                ]
            return "user", [{"functionResponse": response}]
        case "system":  # split_turns takes these apart; kept for exhaustiveness
            raise AssertionError("system messages are not parts")
        case _:
            assert_never(message.role)


# -- thought signatures --------------------------------------------------------------------

_SIGNATURE = "thoughtSignature"
_SIGNED = "signedParts"


def _count(meta: Mapping[str, Any], key: str) -> int | None:
    """An optional token count of ``usageMetadata``: ``None`` when Gemini leaves it out."""
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _signed(state: ProviderState | None, text: str, signature: str | None) -> ProviderState | None:
    """``state`` of a text (or a thought) after one more part of it: the signed parts
    already seen have ``text`` after them, and the part itself is one if it is signed."""
    entries = list(state.get(_SIGNED) or ()) if state is not None else []
    if not entries and signature is None:
        return state
    entries = [{**entry, "after": entry["after"] + len(text)} for entry in entries]
    if signature is not None:
        entries.append({_SIGNATURE: signature, "length": len(text), "after": 0})
    return {**(state or {}), _SIGNED: entries}


def _text_parts(
    text: str, state: ProviderState | None, *, thought: bool = False
) -> list[JSONObject]:
    """``text`` as parts again, each signed part on its own with its signature; the
    unsigned text around them in as few parts as it takes. Empty unsigned text makes no
    part; an empty signed part stays, as Gemini sent it."""
    flag = {"thought": True} if thought else {}
    spans: list[tuple[int, int, str]] = []
    entries = (state or {}).get(_SIGNED)  # a list, unless a transcript was tampered with
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get(_SIGNATURE), str):
            continue
        end = len(text) - as_int(entry.get("after"))
        start = end - as_int(entry.get("length"))
        if 0 <= start <= end:
            spans.append((start, end, entry[_SIGNATURE]))
    parts: list[JSONObject] = []
    done = 0
    for start, end, signature in sorted(spans, key=lambda span: span[0]):  # stable
        if start < done:  # overlapping spans cannot come from one response
            continue
        if start > done:
            parts.append({"text": text[done:start], **flag})
        parts.append({"text": text[start:end], **flag, _SIGNATURE: signature})
        done = end
    if done < len(text):
        parts.append({"text": text[done:], **flag})
    return parts


# -- schemas -------------------------------------------------------------------------------


def gemini_schema(schema: JSONObject) -> JSONObject:
    """A tool's parameter schema as Gemini accepts it (a new object; ``schema`` is kept).

    - local ``$ref`` s (``#/$defs/X``, ``#/definitions/X``, any ``#/...`` pointer) are
      inlined; a reference back into itself (recursion) is cut to what stands beside
      it, usually ``{}`` (any value), and so is one that does not resolve;
    - every other ``$`` keyword (``$defs``, ``$schema``, ``$id``, ...) and
      ``definitions``, ``additionalProperties`` and ``format`` are dropped;
    - a ``null`` branch of ``anyOf``/``oneOf`` and ``"null"`` in a ``type`` list are
      dropped; a union left with one branch becomes that branch;
    - the result is bounded: past ``MAX_SCHEMA_NODES`` objects or ``MAX_SCHEMA_DEPTH``
      levels, a subschema becomes ``{}``. Inlining can grow a schema exponentially
      (two references to a definition that holds two references, and so on), and a
      schema may come from a client or an MCP server. Loosening is safe: the tool's own
      schema still checks the arguments.
    """
    cleaned = _clean(schema, schema, (), [MAX_SCHEMA_NODES])
    return cleaned if isinstance(cleaned, dict) else {}


MAX_SCHEMA_NODES = 10_000
MAX_SCHEMA_DEPTH = 64


def _clean(node: Any, root: Mapping[str, Any], active: tuple[str, ...], budget: list[int]) -> Any:
    """``budget[0]`` is how many more objects the whole result may hold."""
    if not isinstance(node, Mapping):
        return node
    budget[0] -= 1
    if budget[0] < 0 or len(active) > MAX_SCHEMA_DEPTH:
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str):
        beside = {k: v for k, v in node.items() if k != "$ref"}
        target = _resolve(root, ref) if ref not in active else None
        if target is None:
            return _clean(beside, root, active, budget)
        return _clean({**target, **beside}, root, (*active, ref), budget)
    active = (*active, "")  # one level deeper
    out: JSONObject = {}
    for key, value in node.items():
        if key.startswith("$") or key in _DROPPED_KEYWORDS or key in _UNIONS:
            continue
        if key in _ONE_SUBSCHEMA and not isinstance(value, list):
            out[key] = _clean(value, root, active, budget)
        elif key in (*_SUBSCHEMA_LISTS, *_ONE_SUBSCHEMA) and isinstance(value, list):
            out[key] = _clean_each(value, root, active, budget)
        elif key in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {str(k): _clean(v, root, active, budget) for k, v in value.items()}
        elif key == "type" and isinstance(value, list):
            kinds = [kind for kind in value if kind != "null"]
            if kinds:
                out[key] = kinds[0] if len(kinds) == 1 else kinds
        else:
            out[key] = plain(value)
    for key in _UNIONS:
        if isinstance(node.get(key), list):
            branches = [b for b in _clean_each(node[key], root, active, budget) if b != _NULL]
            if len(branches) == 1 and isinstance(branches[0], dict):
                out = {**branches[0], **out}  # the outer description wins
            elif branches:
                out[key] = branches
    return out


def _clean_each(
    values: list[Any], root: Mapping[str, Any], active: tuple[str, ...], budget: list[int]
) -> list[Any]:
    return [_clean(v, root, active, budget) for v in values]


def _resolve(root: Mapping[str, Any], ref: str) -> Mapping[str, Any] | None:
    """The object a local JSON pointer names, or ``None``."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node if isinstance(node, Mapping) else None
