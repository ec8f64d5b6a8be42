"""Pure translation between the neutral loop types and a provider's wire format.

Owns the router: provider-safe tool names (encode/decode, with the memo of shortened
names), and the open table of codecs it dispatches to by name. The name scheme is in
``_codec``; each built-in codec is a module of this package named ``_codec_NAME`` whose
``CODEC`` is registered as ``NAME`` when the package is imported (so a new built-in wire
format is one new module). Anyone else adds one with :func:`register_codec`, without
editing this package. Everything here is plain data in, plain data out.

Deliberately does not know: HTTP, SDKs, retries, keys, model providers, or how a chunk
got here. The adapters in ``cleveragents.llm`` own the transport and feed the router
dicts; a provider names its codec.

Streaming and non-streaming share one mapping: :meth:`ToolCallRouter.parse_response`
restates a whole response as the chunks its stream would have carried (the codec's
``events``) and feeds them to the same :class:`StreamAccumulator`.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._codec import (
    MAX_PROVIDER_NAME,
    TOOL_NAME,
    Codec,
    JSONObject,
    ProviderFormat,
    ProviderMessages,
    ToolDeclaration,
    escape_tokens,
    plain,
    shorten,
    unescape,
)
from ._stream import StreamAccumulator
from ._types import LLMResponse, Message, ToolSchema

__all__ = ["ToolCallRouter", "codec_names", "register_codec"]

CODEC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_CODEC_METHODS = ("name_tokens", "tools", "messages", "feed", "events")
_BUILTIN_PREFIX = "_codec_"

_codecs: dict[str, Codec] = {}
_codecs_lock = threading.Lock()


def register_codec(name: str, codec: Codec, *, replace: bool = False) -> None:
    """Make ``ToolCallRouter(name)`` speak ``codec``: a wire format added at run time.

    ``codec`` has the five methods of the ``Codec`` protocol (``name_tokens``,
    ``tools``, ``messages``, ``feed``, ``events``): pure functions of plain data. A name
    taken already is refused, naming it, unless ``replace`` is true; so is a name
    outside ``[A-Za-z0-9][A-Za-z0-9_.-]{0,63}``, and an object without those methods.
    """
    if not isinstance(name, str) or not CODEC_NAME.fullmatch(name):
        raise ValueError(f"invalid codec name {name!r}: names match {CODEC_NAME.pattern}")
    missing = [m for m in _CODEC_METHODS if not callable(getattr(codec, m, None))]
    if missing:
        raise TypeError(f"codec {name!r} lacks the method(s) {', '.join(missing)} of a Codec")
    with _codecs_lock:
        if name in _codecs and not replace:
            raise ValueError(
                f"a codec named {name!r} is registered already (replace=True replaces it)"
            )
        _codecs[name] = codec


def codec_names() -> tuple[str, ...]:
    """The registered codecs' names, in the order they were registered."""
    return tuple(_codecs)


def _register_builtin_codecs() -> None:
    """Every ``_codec_NAME`` module beside this one holds the built-in codec ``NAME``."""
    package = __name__.rpartition(".")[0]
    found = pkgutil.iter_modules([str(Path(__file__).parent)])
    for name in sorted(m.name for m in found if m.name.startswith(_BUILTIN_PREFIX)):
        module = importlib.import_module(f"{package}.{name}")
        register_codec(name.removeprefix(_BUILTIN_PREFIX), module.CODEC)


_register_builtin_codecs()


class ToolCallRouter:
    """Translate neutral tools, histories and responses to and from one provider's format.

    Pure apart from one memo: names it had to shorten (see ``_codec``), so keep one
    router per caller to decode what that caller sent.

    ``origin`` names the model the router talks to (``provider:model``): responses are
    stamped with it, and provider state of messages from another model is left out of
    requests (see :meth:`messages`). ``None``: nothing is stamped or left out.
    """

    __slots__ = ("_codec", "_decoded", "_encoded", "origin", "provider")

    def __init__(self, provider: ProviderFormat, *, origin: str | None = None) -> None:
        codec = _codecs.get(provider) if isinstance(provider, str) else None
        if codec is None:
            known = ", ".join(repr(name) for name in _codecs)
            raise ValueError(
                f"unknown provider format {provider!r}: the registered codecs are {known}"
            )
        self.provider: ProviderFormat = provider
        self.origin = origin
        self._codec = codec
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
        tokens = self._codec.name_tokens(escape_tokens(name))
        encoded = "".join(tokens)
        if len(encoded) > MAX_PROVIDER_NAME:
            encoded = shorten(tokens, name)
            known = self._decoded.setdefault(encoded, name)
            if known != name:  # 32 bits of hash on top of a shared 53-char prefix
                raise ValueError(f"tool names {known!r} and {name!r} encode alike")
        self._encoded[name] = encoded
        return encoded

    def decode_name(self, encoded: str) -> str:
        """The tool name behind a provider name. Never raises: an unknown or malformed
        name (a model may invent one) decodes leniently and fails later as unknown."""
        known = self._decoded.get(encoded)
        return known if known is not None else unescape(encoded)

    # -- requests ------------------------------------------------------------------------

    def tools(self, schemas: Sequence[ToolSchema]) -> list[JSONObject]:
        """The provider's tool list; ``[]`` when there are no tools (omit the field)."""
        return self._codec.tools(
            [
                ToolDeclaration(self.encode_name(s.name), s.description, plain(s.parameters))
                for s in schemas
            ]
        )

    def messages(self, messages: Sequence[Message]) -> ProviderMessages:
        """Neutral history -> the provider's messages (see :class:`ProviderMessages`).

        Anthropic and Gemini: consecutive messages of one provider role are merged (so
        the results of parallel tool calls travel in one user message), and an
        assistant message with neither text nor tool calls is dropped, since both APIs
        refuse empty content.

        An assistant message that another model produced (its ``origin`` is not this
        router's) goes without its provider state, which only its own model can read,
        and with its readable reasoning as text before its answer
        (``<thinking>...</thinking>``); the message itself is not changed.
        """
        origin = self.origin
        if origin is not None:
            messages = [
                _as_foreign(m) if m.origin not in (None, origin) and m.carries_state() else m
                for m in messages
            ]
        return self._codec.messages(messages, self.encode_name)

    # -- responses -----------------------------------------------------------------------

    def stream(self, *, iteration: int) -> StreamAccumulator:
        """A fresh accumulator for the streamed chunks of one call."""
        return StreamAccumulator(self._codec.feed, self.decode_name, iteration, self.origin)

    def parse_response(self, payload: Mapping[str, Any], *, iteration: int) -> LLMResponse:
        """A provider's non-streaming response JSON -> neutral response."""
        accumulator = self.stream(iteration=iteration)
        for event in self._codec.events(payload):
            accumulator.feed(event)
        return accumulator.result()


def _as_foreign(message: Message) -> Message:
    """A message of another model as this one may read it: no provider state, and the
    readable reasoning as text before the answer."""
    thought = "\n\n".join(r.text for r in message.reasoning if r.text)
    content = message.content
    if thought:
        content = f"<thinking>\n{thought}\n</thinking>" + (f"\n\n{content}" if content else "")
    return attrs.evolve(
        message,
        content=content,
        tool_calls=[attrs.evolve(c, state=None) for c in message.tool_calls],
        reasoning=[],
        state=None,
    )
