"""What the provider codecs share: the ``Codec`` protocol, the one name-encoding scheme,
the shape of a translated history, and small helpers for turning neutral data into
plain JSON.

Owns no provider's format: each lives in its own module (``_codec_openai``,
``_codec_anthropic``, ``_codec_gemini``) behind :class:`Codec`, registered by name in the
router's open table (``register_codec``), from which
:class:`~cleveragents.tool.ToolCallRouter` picks one. Nothing here branches on a
provider.

Name encoding (one scheme for all providers)
--------------------------------------------
Tool names match ``[A-Za-z0-9_.:/-]{1,128}``; providers accept ``[a-zA-Z0-9_-]{1,64}``.
``_`` is the escape character, and only where it has to be:

====================  =========================================
original              encoded
====================  =========================================
``/``                 ``__``        (``builtin/file-read`` -> ``builtin__file-read``)
``:``                 ``_-c``
``.``                 ``_-d``
``_``                 ``_-u`` when followed by ``_ / : . -``, else ``_`` as is
(nothing)             ``_-x``       a lead a codec may put first (:data:`NAME_LEAD`)
====================  =========================================

So ``get_weather`` and ``file-read`` stay as they are. Decoding reads left to right; an
encoded name never holds a bare ``_`` before ``_`` or ``-``, so the reading is unique
and ``decode(encode(n)) == n`` for every valid name. An encoding longer than 64
characters becomes its first whole escapes (at most 53 characters) + ``_-h`` + 8 hex
digits of SHA-256 of the original name. ``_-h`` never occurs in a full encoding, so a
shortened name cannot collide with another tool's full one; the router remembers what
it shortened so that it maps it back exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import attrs

from ._types import Message

if TYPE_CHECKING:
    from ._stream import StreamDraft

__all__ = [
    "NAME_LEAD",
    "Codec",
    "ProviderFormat",
    "ProviderMessages",
    "ProviderStreamError",
    "ToolDeclaration",
]

ProviderFormat: TypeAlias = str
"""A wire format: the name a codec is registered under (``register_codec``), which a
:class:`ToolCallRouter` speaks. ``"openai"``, ``"anthropic"`` and ``"gemini"`` are built
in; the table is open."""

JSONObject: TypeAlias = dict[str, Any]
NameEncoder: TypeAlias = Callable[[str], str]

TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
MAX_PROVIDER_NAME = 64

NAME_LEAD = "_-x"
"""Decodes to nothing: a codec puts it first when its provider refuses a name's start."""

_ESCAPE = {"/": "__", ":": "_-c", ".": "_-d"}
_ESCAPED_UNDERSCORE = "_-u"
_UNDERSCORE_NEEDS_ESCAPE = frozenset("_/:.-")
_CODES = {"c": ":", "d": ".", "u": "_", "x": ""}
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


@attrs.define(frozen=True, slots=True)
class ToolDeclaration:
    """One tool as a codec receives it: its provider-safe name, and a plain copy of its
    parameter schema that the codec may rewrite."""

    name: str
    description: str
    parameters: JSONObject


class ProviderStreamError(Exception):
    """The provider's stream carried an error event (Anthropic's ``error``).

    Raised by :meth:`StreamAccumulator.feed`; the adapters turn it into their own
    error. ``kind`` is the provider's error type, ``detail`` its message.
    """

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"the provider reported {kind}")
        self.kind = kind
        self.detail = detail


class Codec(Protocol):
    """One provider's format: pure data in, pure data out."""

    def name_tokens(self, tokens: list[str]) -> list[str]:
        """The escaped tokens of a name, with whatever lead the provider's name rules
        need (see :data:`NAME_LEAD`)."""
        ...

    def tools(self, declarations: Sequence[ToolDeclaration]) -> list[JSONObject]:
        """The provider's tool list; ``[]`` for none."""
        ...

    def messages(self, messages: Sequence[Message], encode: NameEncoder) -> ProviderMessages:
        """The neutral history in the provider's shape; ``encode`` names the tools."""
        ...

    def feed(self, draft: StreamDraft, chunk: Mapping[str, Any]) -> str:
        """Record one streamed chunk in ``draft``; return the answer text it carried."""
        ...

    def events(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        """A whole (non-streamed) response restated as the chunks its stream carries."""
        ...


# -- names ---------------------------------------------------------------------------------


def escape_tokens(name: str) -> list[str]:
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


def shorten(tokens: Sequence[str], name: str) -> str:
    """The first whole tokens that fit, ``_-h`` and a hash of ``name``: 64 characters."""
    import hashlib  # loaded by the first name too long to send (OpenSSL: ~3 ms at start-up)

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


def unescape(encoded: str) -> str:
    """Undo :func:`escape_tokens` (and leads); lenient: unknown escapes stay as they are."""
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


# -- histories -----------------------------------------------------------------------------

ToBlocks = Callable[[Message, Mapping[str, str]], tuple[str, list[JSONObject]]]


def split_turns(
    messages: Sequence[Message], to_blocks: ToBlocks, blocks_key: str
) -> ProviderMessages:
    """A history for APIs that take system text apart and alternate roles strictly.

    Consecutive messages of one provider role are merged (so the results of parallel
    tool calls travel in one user message), and a message with no blocks (an assistant
    turn with neither text nor tool calls) is dropped, since such APIs refuse empty
    content. ``to_blocks`` gets each message and the tool name of every call id.
    """
    system: list[str] = []
    out: list[JSONObject] = []
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


def call_id(message: Message) -> str:
    """The id of the call a tool message answers; every provider needs it."""
    if not message.tool_call_id:
        raise ValueError("a tool message needs tool_call_id")
    return message.tool_call_id


def dump(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def plain(value: Any) -> Any:
    """A deep copy as plain dicts and lists, so a payload never aliases a tool's schema."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def as_int(value: Any) -> int:
    """A token count from a provider: an int, else 0 (never a bool)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
