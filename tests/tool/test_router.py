"""ToolCallRouter: what every codec shares (the name scheme, copying schemas, the
errors of a malformed history) and the open table of codecs. Each built-in codec's own
mappings are in ``test_codec_<name>.py``.

Every mapping is checked by full-object equality against a literal payload.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolkit import HISTORY

from cleveragents.tool import (
    LLMResponse,
    Message,
    ToolCall,
    ToolCallRouter,
    ToolSchema,
    _router,
    register_codec,
)
from cleveragents.tool._codec import NAME_LEAD, NameEncoder, ProviderMessages, ToolDeclaration
from cleveragents.tool._stream import StreamDraft

SAFE = re.compile(r"[a-zA-Z0-9_-]{1,64}")

NAME_CHARS = "ABCXYZabcxyz0189_.:/-"

BUILT_IN = ["openai", "anthropic", "gemini"]
SCHEMAS = [ToolSchema("builtin/file-read", "Read a file.", {"type": "object"})]


# -- names -----------------------------------------------------------------------------


def test_namespaced_names_encode_to_readable_provider_safe_names() -> None:
    router = ToolCallRouter("openai")
    assert router.encode_name("builtin/file-read") == "builtin__file-read"
    assert router.encode_name("client/open-editor") == "client__open-editor"
    assert router.encode_name("server:local/tool") == "server_-clocal__tool"
    assert router.encode_name("a.b") == "a_-db"


def test_names_that_are_already_safe_stay_unchanged() -> None:
    router = ToolCallRouter("anthropic")
    for name in ("get_weather", "file-read", "x", "snake_case_name_2", "A-b_c"):
        assert router.encode_name(name) == name


def test_underscores_before_escapable_characters_are_escaped() -> None:
    router = ToolCallRouter("openai")
    assert router.encode_name("a__b") == "a_-u_b"
    assert router.encode_name("a_-b") == "a_-u-b"
    assert router.encode_name("a_/b") == "a_-u__b"


def test_long_names_are_shortened_with_a_hash_and_decoded_by_the_same_router() -> None:
    router = ToolCallRouter("openai")
    long_a, long_b = "ns/" + "a" * 100, "ns/" + "a" * 99 + "b"
    enc_a, enc_b = router.encode_name(long_a), router.encode_name(long_b)
    assert enc_a != enc_b
    assert len(enc_a) == len(enc_b) == 64
    assert enc_a.startswith("ns__aaaa")
    assert "_-h" in enc_a
    assert router.decode_name(enc_a) == long_a
    assert router.decode_name(enc_b) == long_b
    assert ToolCallRouter("openai").encode_name(long_a) == enc_a


def test_invalid_tool_names_are_refused_when_encoding() -> None:
    router = ToolCallRouter("openai")
    for bad in ("", "a b", "a" * 129, "tool\n", "é"):
        with pytest.raises(ValueError, match="invalid tool name"):
            router.encode_name(bad)


def test_decoding_an_unknown_or_malformed_name_never_raises() -> None:
    router = ToolCallRouter("openai")
    assert router.decode_name("plain") == "plain"
    assert router.decode_name("bad_-zescape") == "bad_-zescape"
    assert router.decode_name("trailing_-") == "trailing_-"


tool_names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=128)


@given(name=tool_names, provider=st.sampled_from(BUILT_IN))
def test_every_valid_name_round_trips_to_a_provider_safe_name(name: str, provider: Any) -> None:
    router = ToolCallRouter(provider)
    encoded = router.encode_name(name)
    assert SAFE.fullmatch(encoded)
    assert router.decode_name(encoded) == name
    assert ToolCallRouter(provider).encode_name(name) == encoded


@given(first=tool_names, second=tool_names)
def test_distinct_names_never_share_an_encoding(first: str, second: str) -> None:
    router = ToolCallRouter("openai")
    if first != second:
        assert router.encode_name(first) != router.encode_name(second)


@given(name=st.text(alphabet="abcXYZ019_-", min_size=1, max_size=64))
def test_safe_names_without_escape_sequences_are_fixed_points(name: str) -> None:
    if "__" in name or "_-" in name:
        return
    assert ToolCallRouter("anthropic").encode_name(name) == name


# -- what every codec shares -----------------------------------------------------------


def test_no_tools_give_an_empty_tool_list_for_every_provider() -> None:
    for provider in BUILT_IN:
        assert ToolCallRouter(provider).tools([]) == []


def test_tool_list_copies_the_schema_instead_of_aliasing_it() -> None:
    schema = ToolSchema("t", "d", {"type": "object", "properties": {"a": {"type": "string"}}})
    [entry] = ToolCallRouter("anthropic").tools([schema])
    entry["input_schema"]["properties"]["a"]["type"] = "number"
    assert schema.parameters["properties"]["a"]["type"] == "string"


def test_a_tool_message_without_a_call_id_is_refused() -> None:
    with pytest.raises(ValueError, match="tool_call_id"):
        ToolCallRouter("openai").messages([Message("tool", "ok")])


def test_history_to_response_round_trip_keeps_names_and_arguments() -> None:
    for provider in BUILT_IN:
        router = ToolCallRouter(provider)
        sent = router.messages(HISTORY).messages
        assert "builtin/file-read" not in json.dumps(sent)
    router = ToolCallRouter("anthropic")
    blocks = router.messages(HISTORY).messages[1]["content"]
    response = router.parse_response({"content": blocks}, iteration=1)
    assert response.tool_calls == HISTORY[2].tool_calls
    assert response.content == "Reading."


# -- the table of codecs ---------------------------------------------------------------


@pytest.fixture
def scratch_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the codec table, so what a test registers ends with it."""
    monkeypatch.setattr(_router, "_codecs", dict(_router._codecs))


class EchoCodec:
    """A wire format of one line each way: ``{"tool": name}`` per tool, ``{"said": text}``
    per message, and chunks that are ``{"text"}`` or ``{"use": name, "with": args}``."""

    def name_tokens(self, tokens: list[str]) -> list[str]:
        return [NAME_LEAD, *tokens]  # a lead, as Gemini's codec puts before some names

    def tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        return [{"tool": d.name} for d in declarations]

    def messages(self, messages: Sequence[Message], encode: NameEncoder) -> ProviderMessages:
        return ProviderMessages(None, [{"said": m.content} for m in messages])

    def feed(self, draft: StreamDraft, chunk: Mapping[str, Any]) -> str:
        if "use" in chunk:
            call = draft.call(len(draft.calls))
            call.name, call.args_obj = chunk["use"], chunk["with"]
            draft.stop = "use"
        return str(chunk.get("text", ""))

    def events(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        return [payload]


def test_an_unknown_provider_is_refused_naming_the_registered_codecs() -> None:
    with pytest.raises(ValueError, match="unknown provider") as info:
        ToolCallRouter("cohere")
    for name in BUILT_IN:
        assert repr(name) in str(info.value)


def test_the_built_in_codecs_are_the_codec_modules() -> None:
    assert set(BUILT_IN) <= set(_router.codec_names())


def test_a_registered_codec_is_spoken_by_name(scratch_codecs: None) -> None:
    register_codec("echo", EchoCodec())
    router = ToolCallRouter("echo")
    assert router.provider == "echo"
    assert router.tools(SCHEMAS) == [{"tool": "_-xbuiltin__file-read"}]
    assert router.messages([Message("user", "hi")]) == ProviderMessages(None, [{"said": "hi"}])
    stream = router.stream(iteration=2)
    assert stream.feed({"text": "ok"}) == "ok"
    stream.feed({"use": "_-xbuiltin__file-read", "with": {"path": "a"}})
    assert stream.result() == LLMResponse(
        "ok", [ToolCall("call_2_0", "builtin/file-read", {"path": "a"})], stop_reason="use"
    )
    assert "echo" in _router.codec_names()


def test_a_codec_name_taken_is_refused_unless_replaced(scratch_codecs: None) -> None:
    openai = ToolCallRouter("openai").tools(SCHEMAS)
    with pytest.raises(ValueError, match="'openai' is registered already"):
        register_codec("openai", EchoCodec())
    assert ToolCallRouter("openai").tools(SCHEMAS) == openai
    register_codec("openai", EchoCodec(), replace=True)
    assert ToolCallRouter("openai").tools(SCHEMAS) == [{"tool": "_-xbuiltin__file-read"}]


@pytest.mark.parametrize("name", ["", "a b", "a:b", "-x", "x" * 65])
def test_a_codec_name_outside_the_rule_is_refused(scratch_codecs: None, name: str) -> None:
    with pytest.raises(ValueError, match="invalid codec name"):
        register_codec(name, EchoCodec())


def test_an_object_without_the_codec_methods_is_refused(scratch_codecs: None) -> None:
    with pytest.raises(TypeError, match="'half' lacks the method"):
        register_codec("half", object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown provider"):
        ToolCallRouter("half")
