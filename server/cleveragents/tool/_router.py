"""Pure translation between the neutral loop types and three provider wire formats.

Owns: provider-safe tool names (encode/decode), the tool list, the message history,
and the response mapping for OpenAI chat completions, Anthropic messages and Gemini
``generateContent``, streamed or not. Everything here is plain data in, plain data out.

Deliberately does not know: HTTP, SDKs, retries, keys, or how a chunk got here. The
adapters in ``cleveragents.llm`` own the transport and feed this module dicts.

Name encoding (one scheme for all three providers)
--------------------------------------------------
Tool names match ``[A-Za-z0-9_.:/-]{1,128}``; providers accept ``[a-zA-Z0-9_-]{1,64}``.
``_`` is the escape character, and only where it has to be:

====================  =========================================
original              encoded
====================  =========================================
``/``                 ``__``        (``builtin/file-read`` -> ``builtin__file-read``)
``:``                 ``_-c``
``.``                 ``_-d``
``_``                 ``_-u`` when followed by ``_ / : . -``, else ``_`` as is
(nothing)             ``_-x``       leads a Gemini name that would start with ``[0-9-]``
====================  =========================================

So ``get_weather`` and ``file-read`` stay as they are. Decoding reads left to right; an
encoded name never holds a bare ``_`` before ``_`` or ``-``, so the reading is unique
and ``decode(encode(n)) == n`` for every valid name. An encoding longer than 64
characters becomes its first whole escapes (at most 53 characters) + ``_-h`` + 8 hex
digits of SHA-256 of the original name. ``_-h`` never occurs in a full encoding, so a
shortened name cannot collide with another tool's full one; the router remembers what
it shortened so that :meth:`ToolCallRouter.decode_name` maps it back exactly.

Response mapping
----------------
Streaming and non-streaming share one mapping: ``parse_response`` restates a whole
response as the events its stream would have carried and feeds them to the same
:class:`StreamAccumulator`. Calls without a provider id (Gemini, some OpenAI-compatible
servers) get ``call_{iteration}_{index}``: same input, same ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, assert_never

import attrs

from ._errors import ModelProviderError
from ._types import LLMResponse, Message, ToolCall, ToolSchema, Usage

__all__ = ["Provider", "ProviderMessages", "StreamAccumulator", "ToolCallRouter"]

Provider = Literal["openai", "anthropic", "gemini"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic", "gemini")

JSONObject: TypeAlias = dict[str, Any]

TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
PROVIDER_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_PROVIDER_NAME = 64

_ESCAPE = {"/": "__", ":": "_-c", ".": "_-d"}
_ESCAPED_UNDERSCORE = "_-u"
_UNDERSCORE_NEEDS_ESCAPE = frozenset("_/:.-")
_CODES = {"c": ":", "d": ".", "u": "_", "x": ""}
_GEMINI_LEAD = "_-x"
_HASH_MARK = "_-h"
_HASH_HEX = 8


@attrs.define(frozen=True, slots=True)
class ProviderMessages:
    """A history in a provider's shape.

    ``system`` is the joined text of the system messages for providers that take it
    apart from the history (Anthropic's ``system``, Gemini's ``systemInstruction``);
    it is always ``None`` for OpenAI, whose system messages stay in ``messages``.
    """

    system: str | None
    messages: list[JSONObject]


class ToolCallRouter:
    """Translate neutral tools, histories and responses to and from one provider's format.

    Pure apart from one memo: names it had to shorten (see the module docstring), so
    keep one router per caller to decode what that caller sent.
    """

    __slots__ = ("_decoded", "_encoded", "provider")

    def __init__(self, provider: Provider) -> None:
        if provider not in PROVIDERS:
            raise ValueError(f"unknown provider {provider!r}: expected one of {PROVIDERS}")
        self.provider: Provider = provider
        self._encoded: dict[str, str] = {}
        self._decoded: dict[str, str] = {}

    # -- names -------------------------------------------------------------------------

    def encode_name(self, name: str) -> str:
        """The provider-safe form of a valid tool name; deterministic and reversible."""
        cached = self._encoded.get(name)
        if cached is not None:
            return cached
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise ValueError(f"invalid tool name {name!r}: names match {TOOL_NAME.pattern}")
        tokens = _escape_tokens(name)
        if self.provider == "gemini" and not (tokens[0][0].isalpha() or tokens[0][0] == "_"):
            tokens.insert(0, _GEMINI_LEAD)
        encoded = "".join(tokens)
        if len(encoded) > MAX_PROVIDER_NAME:
            encoded = _shorten(tokens, name)
            known = self._decoded.setdefault(encoded, name)
            if known != name:  # 32 bits of hash on top of a shared 53-char prefix
                raise ValueError(f"tool names {known!r} and {name!r} encode alike")
        self._encoded[name] = encoded
        return encoded

    def decode_name(self, encoded: str) -> str:
        """The tool name behind a provider name. Never raises: an unknown or malformed
        name (a model may invent one) decodes leniently and fails later as unknown."""
        known = self._decoded.get(encoded)
        if known is not None:
            return known
        out: list[str] = []
        i, n = 0, len(encoded)
        while i < n:
            if encoded.startswith("__", i):
                out.append("/")
                i += 2
            elif encoded.startswith("_-", i) and i + 2 < n and encoded[i + 2] in _CODES:
                out.append(_CODES[encoded[i + 2]])
                i += 3
            else:
                out.append(encoded[i])
                i += 1
        return "".join(out)

    # -- requests ------------------------------------------------------------------------

    def tools(self, schemas: Sequence[ToolSchema]) -> list[JSONObject]:
        """The provider's tool list; ``[]`` when there are no tools (omit the field)."""
        decls = [(self.encode_name(s.name), s.description, _plain(s.parameters)) for s in schemas]
        if self.provider == "openai":
            return [
                {
                    "type": "function",
                    "function": {"name": n, "description": d, "parameters": p},
                }
                for n, d, p in decls
            ]
        if self.provider == "anthropic":
            return [{"name": n, "description": d, "input_schema": p} for n, d, p in decls]
        if not decls:
            return []
        return [
            {
                "functionDeclarations": [
                    {"name": n, "description": d, "parametersJsonSchema": p} for n, d, p in decls
                ]
            }
        ]

    def messages(self, messages: Sequence[Message]) -> ProviderMessages:
        """Neutral history -> the provider's messages (see :class:`ProviderMessages`).

        Anthropic and Gemini: consecutive messages of one provider role are merged (so
        the results of parallel tool calls travel in one user message), and an
        assistant message with neither text nor tool calls is dropped, since both APIs
        refuse empty content.
        """
        if self.provider == "openai":
            return ProviderMessages(None, [self._openai_message(m) for m in messages])
        system: list[str] = []
        out: list[JSONObject] = []
        blocks_key = "content" if self.provider == "anthropic" else "parts"
        to_blocks = self._anthropic_blocks if self.provider == "anthropic" else self._gemini_parts
        names = {c.id: c.name for m in messages for c in m.tool_calls}
        for message in messages:
            if message.role == "system":
                system.append(message.content)
                continue
            role, blocks = to_blocks(message, names)
            if not blocks:
                continue
            if out and out[-1]["role"] == role:
                out[-1][blocks_key].extend(blocks)
            else:
                out.append({"role": role, blocks_key: blocks})
        return ProviderMessages("\n\n".join(system) if system else None, out)

    def _openai_message(self, message: Message) -> JSONObject:
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
                            "function": {
                                "name": self.encode_name(call.name),
                                "arguments": _dump(call.arguments),
                            },
                        }
                        for call in message.tool_calls
                    ],
                }
            case "tool":
                return {
                    "role": "tool",
                    "tool_call_id": _call_id(message),
                    "content": message.content,
                }
            case _:
                assert_never(message.role)

    def _anthropic_blocks(
        self, message: Message, names: Mapping[str, str]
    ) -> tuple[str, list[JSONObject]]:
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
                        "name": self.encode_name(call.name),
                        "input": dict(call.arguments),
                    }
                    for call in message.tool_calls
                )
                return "assistant", blocks
            case "tool":
                result = {
                    "type": "tool_result",
                    "tool_use_id": _call_id(message),
                    "content": message.content,
                    "is_error": message.is_error,
                }
                return "user", [result]
            case "system":  # handled by the caller; kept for exhaustiveness
                raise AssertionError("system messages are not blocks")
            case _:
                assert_never(message.role)

    def _gemini_parts(
        self, message: Message, names: Mapping[str, str]
    ) -> tuple[str, list[JSONObject]]:
        match message.role:
            case "user":
                return "user", [{"text": message.content}]
            case "assistant":
                parts: list[JSONObject] = []
                if message.content:
                    parts.append({"text": message.content})
                parts.extend(
                    {
                        "functionCall": {
                            "name": self.encode_name(call.name),
                            "args": dict(call.arguments),
                        }
                    }
                    for call in message.tool_calls
                )
                return "model", parts
            case "tool":
                name = message.name or names.get(_call_id(message))
                if not name:
                    raise ValueError(
                        f"tool result {message.tool_call_id!r} names no tool; "
                        "Gemini needs the tool name with each result"
                    )
                key = "error" if message.is_error else "output"
                response = {"name": self.encode_name(name), "response": {key: message.content}}
                return "user", [{"functionResponse": response}]
            case "system":
                raise AssertionError("system messages are not parts")
            case _:
                assert_never(message.role)

    # -- responses -----------------------------------------------------------------------

    def stream(self, *, iteration: int) -> StreamAccumulator:
        """A fresh accumulator for the streamed chunks of one call."""
        return StreamAccumulator(self, iteration)

    def parse_response(self, payload: Mapping[str, Any], *, iteration: int) -> LLMResponse:
        """A provider's non-streaming response JSON -> neutral response."""
        accumulator = self.stream(iteration=iteration)
        for event in _AS_EVENTS[self.provider](payload):
            accumulator.feed(event)
        return accumulator.result()


class StreamAccumulator:
    """Collects one call's streamed chunks (as dicts) into an :class:`LLMResponse`.

    ``feed`` takes one OpenAI ``chat.completion.chunk``, one Anthropic stream event, or
    one Gemini ``GenerateContentResponse``, and returns the text it carried (``""`` if
    none) so the adapter can report it at once. Tool-call arguments may arrive split
    anywhere, mid-JSON included; they are parsed only in :meth:`result`.
    """

    __slots__ = ("_calls", "_feed", "_iteration", "_router", "_stop", "_text", "_usage")

    def __init__(self, router: ToolCallRouter, iteration: int) -> None:
        self._router = router
        self._iteration = iteration
        self._text: list[str] = []
        self._calls: dict[int, _CallDraft] = {}
        self._usage: Usage | None = None
        self._stop: str | None = None
        self._feed = _FEEDERS[router.provider]

    def feed(self, chunk: Mapping[str, Any]) -> str:
        text = self._feed(self, chunk)
        if text:
            self._text.append(text)
        return text

    def result(self) -> LLMResponse:
        calls = [
            self._calls[key].finish(self._router, f"call_{self._iteration}_{index}")
            for index, key in enumerate(sorted(self._calls))
        ]
        return LLMResponse(
            content="".join(self._text),
            tool_calls=calls,
            usage=self._usage,
            stop_reason=self._stop,
        )

    def _call(self, key: int) -> _CallDraft:
        draft = self._calls.get(key)
        if draft is None:
            draft = self._calls[key] = _CallDraft()
        return draft


@attrs.define(slots=True)
class _CallDraft:
    """One tool call while its pieces arrive. ``args_obj`` holds arguments a provider
    sent already parsed; streamed ``args_text`` wins over it when present."""

    id: str = ""
    name: str = ""
    args_text: list[str] = attrs.field(factory=list)
    args_obj: Any = None

    def finish(self, router: ToolCallRouter, default_id: str) -> ToolCall:
        name = router.decode_name(self.name)
        call = ToolCall(id=self.id or default_id, name=name)
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


# -- per-provider chunk feeders ------------------------------------------------------------


def _feed_openai(acc: StreamAccumulator, chunk: Mapping[str, Any]) -> str:
    usage = chunk.get("usage")
    if usage:
        acc._usage = Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))
    text: list[str] = []
    for choice in chunk.get("choices") or ():
        if choice.get("index", 0) != 0:  # we never ask for n > 1
            continue
        if choice.get("finish_reason"):
            acc._stop = choice["finish_reason"]
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            text.append(delta["content"])
        for position, piece in enumerate(delta.get("tool_calls") or ()):
            index = piece.get("index")
            draft = acc._call(index if isinstance(index, int) else position)
            if piece.get("id") and not draft.id:
                draft.id = piece["id"]
            function = piece.get("function") or {}
            if function.get("name"):
                draft.name += function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                draft.args_text.append(arguments)
            elif arguments is not None:  # a few compatible servers send an object
                draft.args_obj = arguments
    return "".join(text)


def _feed_anthropic(acc: StreamAccumulator, event: Mapping[str, Any]) -> str:
    kind = event.get("type")
    if kind == "message_start":
        message = event.get("message") or {}
        acc._usage = _anthropic_usage(message.get("usage"), Usage())
        if message.get("stop_reason"):
            acc._stop = message["stop_reason"]
    elif kind == "content_block_start":
        block = event.get("content_block") or {}
        if block.get("type") == "text":
            return str(block.get("text") or "")
        if block.get("type") == "tool_use":
            draft = acc._call(_int(event.get("index")))
            draft.id = str(block.get("id") or "")
            draft.name = str(block.get("name") or "")
            draft.args_obj = block.get("input")
    elif kind == "content_block_delta":
        delta = event.get("delta") or {}
        if delta.get("type") == "text_delta":
            return str(delta.get("text") or "")
        if delta.get("type") == "input_json_delta":
            acc._call(_int(event.get("index"))).args_text.append(
                str(delta.get("partial_json") or "")
            )
        # thinking, signature and citation deltas carry no answer text
    elif kind == "message_delta":
        if (event.get("delta") or {}).get("stop_reason"):
            acc._stop = event["delta"]["stop_reason"]
        if event.get("usage"):
            acc._usage = _anthropic_usage(event["usage"], acc._usage or Usage())
    elif kind == "error":
        error = event.get("error") or {}
        raise ModelProviderError(f"the provider reported {error.get('type', 'an error')}")
    # ping, content_block_stop and message_stop change nothing
    return ""


def _feed_gemini(acc: StreamAccumulator, chunk: Mapping[str, Any]) -> str:
    meta = chunk.get("usageMetadata")
    if meta:
        acc._usage = Usage(
            _int(meta.get("promptTokenCount")),
            _int(meta.get("candidatesTokenCount")) + _int(meta.get("thoughtsTokenCount")),
        )
    text: list[str] = []
    for candidate in (chunk.get("candidates") or ())[:1]:
        if candidate.get("finishReason"):
            acc._stop = candidate["finishReason"]
        for part in (candidate.get("content") or {}).get("parts") or ():
            if "functionCall" in part:
                call = part["functionCall"] or {}
                draft = acc._call(len(acc._calls))
                draft.id = str(call.get("id") or "")
                draft.name = str(call.get("name") or "")
                draft.args_obj = call.get("args") or {}
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                text.append(part["text"])
    return "".join(text)


_FEEDERS: dict[Provider, Callable[[StreamAccumulator, Mapping[str, Any]], str]] = {
    "openai": _feed_openai,
    "anthropic": _feed_anthropic,
    "gemini": _feed_gemini,
}


# -- whole responses restated as stream events -------------------------------------------


def _openai_events(payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    choices = []
    for choice in payload.get("choices") or ():
        message = dict(choice.get("message") or {})
        message["tool_calls"] = [
            {**call, "index": i} for i, call in enumerate(message.get("tool_calls") or ())
        ]
        choices.append({**choice, "delta": message})
    return [{"choices": choices, "usage": payload.get("usage")}]


def _anthropic_events(payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    yield {"type": "message_start", "message": {"usage": payload.get("usage")}}
    for index, block in enumerate(payload.get("content") or ()):
        yield {"type": "content_block_start", "index": index, "content_block": block}
    yield {"type": "message_delta", "delta": {"stop_reason": payload.get("stop_reason")}}


def _gemini_events(payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    return [payload]


_AS_EVENTS: dict[Provider, Callable[[Mapping[str, Any]], Iterable[Mapping[str, Any]]]] = {
    "openai": _openai_events,
    "anthropic": _anthropic_events,
    "gemini": _gemini_events,
}


# -- helpers -------------------------------------------------------------------------------


def _escape_tokens(name: str) -> list[str]:
    """One token per character of ``name``: its encoding (see the module docstring)."""
    tokens: list[str] = []
    last = len(name) - 1
    for i, ch in enumerate(name):
        if ch == "_":
            escape = i < last and name[i + 1] in _UNDERSCORE_NEEDS_ESCAPE
            tokens.append(_ESCAPED_UNDERSCORE if escape else "_")
        else:
            tokens.append(_ESCAPE.get(ch, ch))
    return tokens


def _shorten(tokens: Sequence[str], name: str) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_HEX]
    budget = MAX_PROVIDER_NAME - len(_HASH_MARK) - _HASH_HEX
    prefix: list[str] = []
    used = 0
    for token in tokens:
        if used + len(token) > budget:
            break
        prefix.append(token)
        used += len(token)
    if prefix and prefix[-1] == "_":  # a bare "_" before "_-h" would read as "/"
        prefix.pop()
    return "".join(prefix) + _HASH_MARK + digest


def _anthropic_usage(raw: Mapping[str, Any] | None, previous: Usage) -> Usage:
    if not raw:
        return previous
    inputs = [raw.get(k) for k in _ANTHROPIC_INPUT_KEYS]
    input_tokens = (
        sum(_int(v) for v in inputs)
        if any(v is not None for v in inputs)
        else previous.input_tokens
    )
    output = raw.get("output_tokens")
    return Usage(input_tokens, _int(output) if output is not None else previous.output_tokens)


_ANTHROPIC_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _call_id(message: Message) -> str:
    if not message.tool_call_id:
        raise ValueError("a tool message needs tool_call_id")
    return message.tool_call_id


def _dump(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def _plain(value: Any) -> Any:
    """A deep copy as plain dicts and lists, so a payload never aliases a tool's schema."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
