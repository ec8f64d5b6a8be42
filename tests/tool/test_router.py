"""ToolCallRouter: names, tool lists, histories and responses for three providers.

Every mapping is checked by full-object equality against a literal payload.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleveragents.tool import (
    LLMResponse,
    Message,
    ProviderStreamError,
    ToolCall,
    ToolCallRouter,
    ToolSchema,
    ToolSpec,
    Usage,
)
from cleveragents.tool._codec import ProviderMessages  # the router's own return type
from cleveragents.tool._codec_gemini import MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES

SAFE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
NAME_CHARS = "ABCXYZabcxyz0189_.:/-"

SCHEMAS = [
    ToolSchema(
        "builtin/file-read",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSchema("server:local/tool", "A server tool.", {"type": "object"}),
]

HISTORY = [
    Message("system", "Be brief."),
    Message("user", "Read a.txt"),
    Message(
        "assistant",
        "Reading.",
        tool_calls=[
            ToolCall("c1", "builtin/file-read", {"path": "a.txt"}),
            ToolCall("c2", "server:local/tool", {}),
        ],
    ),
    Message("tool", "hello", tool_call_id="c1", name="builtin/file-read"),
    Message("tool", "boom", tool_call_id="c2", name="server:local/tool", is_error=True),
    Message("assistant", "It says hello."),
]


# -- names ---------------------------------------------------------------------------------


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


def test_gemini_names_that_start_with_a_digit_or_dash_get_a_letter_safe_lead() -> None:
    gemini, openai = ToolCallRouter("gemini"), ToolCallRouter("openai")
    assert gemini.encode_name("9lives") == "_-x9lives"
    assert gemini.encode_name("-dash") == "_-x-dash"
    assert gemini.decode_name("_-x9lives") == "9lives"
    assert openai.encode_name("9lives") == "9lives"


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


def test_an_unknown_provider_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        ToolCallRouter("cohere")  # type: ignore[arg-type]


tool_names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=128)


@given(name=tool_names, provider=st.sampled_from(["openai", "anthropic", "gemini"]))
def test_every_valid_name_round_trips_to_a_provider_safe_name(name: str, provider: Any) -> None:
    router = ToolCallRouter(provider)
    encoded = router.encode_name(name)
    assert SAFE.fullmatch(encoded)
    if provider == "gemini":
        assert encoded[0].isalpha() or encoded[0] == "_"
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


# -- tool lists ----------------------------------------------------------------------------


def test_openai_tool_list_uses_function_entries() -> None:
    assert ToolCallRouter("openai").tools(SCHEMAS) == [
        {
            "type": "function",
            "function": {
                "name": "builtin__file-read",
                "description": "Read a file.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "server_-clocal__tool",
                "description": "A server tool.",
                "parameters": {"type": "object"},
            },
        },
    ]


def test_anthropic_tool_list_uses_input_schema() -> None:
    assert ToolCallRouter("anthropic").tools(SCHEMAS) == [
        {
            "name": "builtin__file-read",
            "description": "Read a file.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
        {
            "name": "server_-clocal__tool",
            "description": "A server tool.",
            "input_schema": {"type": "object"},
        },
    ]


def test_gemini_tool_list_is_one_tool_of_function_declarations() -> None:
    assert ToolCallRouter("gemini").tools(SCHEMAS) == [
        {
            "functionDeclarations": [
                {
                    "name": "builtin__file-read",
                    "description": "Read a file.",
                    "parametersJsonSchema": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"],
                    },
                },
                {
                    "name": "server_-clocal__tool",
                    "description": "A server tool.",
                    "parametersJsonSchema": {"type": "object"},
                },
            ]
        }
    ]


def gemini_parameters(parameters: dict[str, Any]) -> Any:
    [tool] = ToolCallRouter("gemini").tools([ToolSchema("t", "d", parameters)])
    return tool["functionDeclarations"][0]["parametersJsonSchema"]


def test_gemini_schemas_inline_local_refs_and_drop_what_gemini_refuses() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "path": {"$ref": "#/$defs/path", "description": "Where."},
            "when": {"type": "string", "format": "date-time"},
            "format": {"$ref": "#/definitions/style"},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["path"],
        "additionalProperties": False,
        "$defs": {"path": {"type": "string", "format": "uri-reference", "minLength": 1}},
        "definitions": {"style": {"enum": ["short", "long"]}},
    }
    original = json.loads(json.dumps(schema))
    assert gemini_parameters(schema) == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": "Where."},
            "when": {"type": "string"},
            "format": {"enum": ["short", "long"]},
            "meta": {"type": "object"},
        },
        "required": ["path"],
    }
    assert schema == original


def test_gemini_schemas_cut_recursive_and_unresolvable_refs() -> None:
    tree = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
            "elsewhere": {"$ref": "https://example.com/schema.json", "description": "Far."},
        },
    }
    assert gemini_parameters(tree) == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "children": {"type": "array", "items": {}},
                        "elsewhere": {"description": "Far."},
                    },
                },
            },
            "elsewhere": {"description": "Far."},
        },
    }


def _size(node: object) -> int:
    if isinstance(node, dict):
        return 1 + sum(_size(v) for v in node.values())
    if isinstance(node, list):
        return sum(_size(v) for v in node)
    return 0


def _depth(node: object) -> int:
    if isinstance(node, dict):
        return 1 + max((_depth(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return max((_depth(v) for v in node), default=0)
    return 0


def test_gemini_schemas_stay_bounded_however_the_refs_multiply() -> None:
    """Two references to a definition that holds two references, forty deep, would
    inline to 2**40 objects: a client or an MCP server may send such a schema."""
    defs = {
        f"d{i}": {"type": "object", "properties": {
            "a": {"$ref": f"#/$defs/d{i + 1}"}, "b": {"$ref": f"#/$defs/d{i + 1}"}}}
        for i in range(40)
    }  # fmt: skip
    defs["d40"] = {"type": "string"}
    cleaned = gemini_parameters({"$ref": "#/$defs/d0", "$defs": defs})
    assert cleaned["type"] == "object"
    assert 1_000 < _size(cleaned) <= MAX_SCHEMA_NODES + 1


def test_gemini_schemas_stay_bounded_in_depth() -> None:
    """A chain of 500 references compiles (a validator calls one function per
    reference), but inlined it would be 500 levels deep."""
    chain = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(500)}
    chain["d500"] = {"type": "string"}
    schema = {"$ref": "#/$defs/d0", "$defs": chain}
    ToolSpec("t/chain", "Chain.", schema, lambda inputs: None)  # a schema a tool may have
    cleaned = gemini_parameters(schema)
    assert cleaned["type"] == "array"
    assert _depth(cleaned) <= MAX_SCHEMA_DEPTH + 2


def test_gemini_schemas_drop_null_branches_and_collapse_single_unions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "N."},
            "either": {"oneOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
            "listed": {"type": ["string", "null"]},
            "mixed": {"type": ["string", "integer"]},
        },
    }
    assert gemini_parameters(schema) == {
        "type": "object",
        "properties": {
            "maybe": {"type": "integer", "description": "N."},
            "either": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "listed": {"type": "string"},
            "mixed": {"type": ["string", "integer"]},
        },
    }


def test_only_gemini_cleans_schemas() -> None:
    schema = {"type": "object", "additionalProperties": False, "$defs": {}}
    [tool] = ToolCallRouter("openai").tools([ToolSchema("t", "d", schema)])
    assert tool["function"]["parameters"] == schema


def test_no_tools_give_an_empty_tool_list_for_every_provider() -> None:
    for provider in ("openai", "anthropic", "gemini"):
        assert ToolCallRouter(provider).tools([]) == []


def test_tool_list_copies_the_schema_instead_of_aliasing_it() -> None:
    schema = ToolSchema("t", "d", {"type": "object", "properties": {"a": {"type": "string"}}})
    [entry] = ToolCallRouter("anthropic").tools([schema])
    entry["input_schema"]["properties"]["a"]["type"] = "number"
    assert schema.parameters["properties"]["a"]["type"] == "string"


# -- histories -----------------------------------------------------------------------------


def test_openai_history_keeps_system_inline_and_tool_results_as_tool_messages() -> None:
    assert ToolCallRouter("openai").messages(HISTORY) == ProviderMessages(
        system=None,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Read a.txt"},
            {
                "role": "assistant",
                "content": "Reading.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "builtin__file-read",
                            "arguments": '{"path": "a.txt"}',
                        },
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "server_-clocal__tool", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "hello"},
            {"role": "tool", "tool_call_id": "c2", "content": "boom"},
            {"role": "assistant", "content": "It says hello."},
        ],
    )


def test_openai_assistant_message_with_only_tool_calls_has_null_content() -> None:
    history = [
        Message("assistant", "", tool_calls=[ToolCall("c9", "get_weather", {"city": "Oslo"})])
    ]
    assert ToolCallRouter("openai").messages(history).messages == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c9",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        }
    ]


def test_anthropic_history_moves_system_out_and_merges_tool_results() -> None:
    assert ToolCallRouter("anthropic").messages(HISTORY) == ProviderMessages(
        system="Be brief.",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading."},
                    {
                        "type": "tool_use",
                        "id": "c1",
                        "name": "builtin__file-read",
                        "input": {"path": "a.txt"},
                    },
                    {"type": "tool_use", "id": "c2", "name": "server_-clocal__tool", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "c1",
                        "content": "hello",
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "c2",
                        "content": "boom",
                        "is_error": True,
                    },
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "It says hello."}]},
        ],
    )


def test_anthropic_history_joins_system_messages_and_drops_empty_assistant_turns() -> None:
    history = [
        Message("system", "One."),
        Message("system", "Two."),
        Message("user", "hi"),
        Message("assistant", ""),
        Message("user", "again"),
    ]
    assert ToolCallRouter("anthropic").messages(history) == ProviderMessages(
        system="One.\n\nTwo.",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}],
            }
        ],
    )


def test_gemini_history_uses_model_role_and_function_parts() -> None:
    assert ToolCallRouter("gemini").messages(HISTORY) == ProviderMessages(
        system="Be brief.",
        messages=[
            {"role": "user", "parts": [{"text": "Read a.txt"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Reading."},
                    {"functionCall": {"name": "builtin__file-read", "args": {"path": "a.txt"}}},
                    {"functionCall": {"name": "server_-clocal__tool", "args": {}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "builtin__file-read",
                            "response": {"output": "hello"},
                        }
                    },
                    {
                        "functionResponse": {
                            "name": "server_-clocal__tool",
                            "response": {"error": "boom"},
                        }
                    },
                ],
            },
            {"role": "model", "parts": [{"text": "It says hello."}]},
        ],
    )


def test_gemini_tool_result_without_a_name_takes_it_from_the_matching_call() -> None:
    history = [
        Message("assistant", "", tool_calls=[ToolCall("c1", "builtin/file-read", {})]),
        Message("tool", "ok", tool_call_id="c1"),
    ]
    assert ToolCallRouter("gemini").messages(history).messages[1] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "builtin__file-read", "response": {"output": "ok"}}}
        ],
    }


def test_gemini_tool_result_with_no_known_name_is_refused() -> None:
    with pytest.raises(ValueError, match="names no tool"):
        ToolCallRouter("gemini").messages([Message("tool", "ok", tool_call_id="zz")])


def test_a_tool_message_without_a_call_id_is_refused() -> None:
    with pytest.raises(ValueError, match="tool_call_id"):
        ToolCallRouter("openai").messages([Message("tool", "ok")])


# -- whole responses -----------------------------------------------------------------------


def test_openai_response_maps_text_tool_calls_and_usage() -> None:
    payload = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Let me look.",
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {
                                "name": "builtin__file-read",
                                "arguments": '{"path": "a.txt"}',
                            },
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "server_-clocal__tool", "arguments": "{oops"},
                        },
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
    }
    assert ToolCallRouter("openai").parse_response(payload, iteration=1) == LLMResponse(
        content="Let me look.",
        tool_calls=[
            ToolCall("call_a", "builtin/file-read", {"path": "a.txt"}),
            ToolCall(
                "call_b",
                "server:local/tool",
                {},
                parse_error="the arguments of server:local/tool are not valid JSON: "
                "Expecting property name enclosed in double quotes at line 1 column 2",
            ),
        ],
        usage=Usage(12, 7),
        stop_reason="tool_calls",
    )


def test_openai_response_without_tools_or_usage_is_plain_text() -> None:
    payload = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ]
    }
    assert ToolCallRouter("openai").parse_response(payload, iteration=3) == LLMResponse(
        content="Hi", stop_reason="stop"
    )


def test_arguments_that_are_json_but_not_an_object_are_a_parse_error() -> None:
    payload = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "x",
                            "type": "function",
                            "function": {"name": "t", "arguments": "[1]"},
                        }
                    ],
                },
            }
        ]
    }
    assert ToolCallRouter("openai").parse_response(payload, iteration=1).tool_calls == [
        ToolCall("x", "t", {}, parse_error="the arguments of t must be a JSON object, not list")
    ]


def test_anthropic_response_maps_blocks_and_usage_with_cache_tokens() -> None:
    payload = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "Reading "},
            {"type": "text", "text": "now."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "builtin__file-read",
                "input": {"path": "a.txt"},
            },
            {"type": "tool_use", "id": "toolu_2", "name": "server_-clocal__tool", "input": {}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 20,
            "cache_creation_input_tokens": 3,
            "cache_read_input_tokens": 2,
            "output_tokens": 9,
        },
    }
    assert ToolCallRouter("anthropic").parse_response(payload, iteration=2) == LLMResponse(
        content="Reading now.",
        tool_calls=[
            ToolCall("toolu_1", "builtin/file-read", {"path": "a.txt"}),
            ToolCall("toolu_2", "server:local/tool", {}),
        ],
        usage=Usage(25, 9),
        stop_reason="tool_use",
    )


def test_gemini_response_maps_parts_and_gets_deterministic_call_ids() -> None:
    payload = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "thinking...", "thought": True},
                        {"text": "Sure."},
                        {"functionCall": {"name": "builtin__file-read", "args": {"path": "a"}}},
                        {"functionCall": {"name": "server_-clocal__tool", "args": {}}},
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 30,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 4,
            "totalTokenCount": 39,
        },
    }
    expected = LLMResponse(
        content="Sure.",
        tool_calls=[
            ToolCall("call_4_0", "builtin/file-read", {"path": "a"}),
            ToolCall("call_4_1", "server:local/tool", {}),
        ],
        usage=Usage(30, 9),
        stop_reason="STOP",
    )
    assert ToolCallRouter("gemini").parse_response(payload, iteration=4) == expected
    assert ToolCallRouter("gemini").parse_response(payload, iteration=4) == expected
    other = ToolCallRouter("gemini").parse_response(payload, iteration=5)
    assert [c.id for c in other.tool_calls] == ["call_5_0", "call_5_1"]


def test_gemini_call_ids_from_the_provider_are_kept() -> None:
    payload = {
        "candidates": [
            {"content": {"parts": [{"functionCall": {"id": "fc-1", "name": "t", "args": {}}}]}}
        ]
    }
    assert ToolCallRouter("gemini").parse_response(payload, iteration=1).tool_calls == [
        ToolCall("fc-1", "t", {})
    ]


def test_history_to_response_round_trip_keeps_names_and_arguments() -> None:
    for provider in ("openai", "anthropic", "gemini"):
        router = ToolCallRouter(provider)
        sent = router.messages(HISTORY).messages
        assert "builtin/file-read" not in json.dumps(sent)
    router = ToolCallRouter("anthropic")
    blocks = router.messages(HISTORY).messages[1]["content"]
    response = router.parse_response({"content": blocks}, iteration=1)
    assert response.tool_calls == HISTORY[2].tool_calls
    assert response.content == "Reading."


# -- streams -------------------------------------------------------------------------------


def _openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": None,
    }


def _tool_delta(index: int, arguments: str, **extra: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if "name" in extra:
        function["name"] = extra.pop("name")
    return {"tool_calls": [{"index": index, "function": function, **extra}]}


def test_openai_stream_accumulates_arguments_split_mid_json() -> None:
    chunks = [
        _openai_chunk({"role": "assistant", "content": ""}),
        _openai_chunk({"content": "Rea"}),
        _openai_chunk({"content": "ding."}),
        _openai_chunk(_tool_delta(0, "", id="call_a", type="function", name="builtin__file-read")),
        _openai_chunk(_tool_delta(0, '{"pa')),
        _openai_chunk(
            _tool_delta(1, "", id="call_b", type="function", name="server_-clocal__tool")
        ),
        _openai_chunk(_tool_delta(0, 'th": "a.')),
        _openai_chunk(_tool_delta(1, '{"x": [1,')),
        _openai_chunk(_tool_delta(0, 'txt"}')),
        _openai_chunk(_tool_delta(1, " 2]}")),
        _openai_chunk({}, finish="tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 20}},
    ]
    accumulator = ToolCallRouter("openai").stream(iteration=1)
    deltas = [accumulator.feed(chunk) for chunk in chunks]
    assert [d for d in deltas if d] == ["Rea", "ding."]
    assert accumulator.result() == LLMResponse(
        content="Reading.",
        tool_calls=[
            ToolCall("call_a", "builtin/file-read", {"path": "a.txt"}),
            ToolCall("call_b", "server:local/tool", {"x": [1, 2]}),
        ],
        usage=Usage(50, 20),
        stop_reason="tool_calls",
    )


def test_openai_stream_without_call_ids_gets_deterministic_ids() -> None:
    chunks = [
        _openai_chunk(_tool_delta(0, '{"a"', name="t")),
        _openai_chunk(_tool_delta(0, ": 1}")),
    ]
    accumulator = ToolCallRouter("openai").stream(iteration=7)
    for chunk in chunks:
        accumulator.feed(chunk)
    assert accumulator.result().tool_calls == [ToolCall("call_7_0", "t", {"a": 1})]


def test_openai_stream_and_whole_response_give_the_same_result() -> None:
    whole = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "content": "ok",
                    "tool_calls": [
                        {
                            "id": "i",
                            "type": "function",
                            "function": {"name": "a__b", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2},
    }
    accumulator = ToolCallRouter("openai").stream(iteration=1)
    accumulator.feed(_openai_chunk({"content": "ok"}))
    accumulator.feed(_openai_chunk(_tool_delta(0, "{", id="i", name="a__b")))
    accumulator.feed(_openai_chunk(_tool_delta(0, "}"), finish="tool_calls"))
    accumulator.feed({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}})
    assert accumulator.result() == ToolCallRouter("openai").parse_response(whole, iteration=1)


def test_anthropic_stream_accumulates_text_json_fragments_and_usage() -> None:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 40, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "On "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "it."}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "builtin__file-read",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"path": "a'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '.txt"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_2",
                "name": "server_-clocal__tool",
                "input": {},
            },
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 33},
        },
        {"type": "message_stop"},
    ]
    accumulator = ToolCallRouter("anthropic").stream(iteration=1)
    deltas = [accumulator.feed(event) for event in events]
    assert [d for d in deltas if d] == ["On ", "it."]
    assert accumulator.result() == LLMResponse(
        content="On it.",
        tool_calls=[
            ToolCall("toolu_1", "builtin/file-read", {"path": "a.txt"}),
            ToolCall("toolu_2", "server:local/tool", {}),
        ],
        usage=Usage(40, 33),
        stop_reason="tool_use",
    )


def test_anthropic_stream_error_event_raises_a_provider_stream_error() -> None:
    accumulator = ToolCallRouter("anthropic").stream(iteration=1)
    with pytest.raises(ProviderStreamError) as info:
        accumulator.feed({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    assert (info.value.kind, info.value.detail) == ("overloaded_error", "x")


def test_gemini_stream_appends_text_and_numbers_calls_across_chunks() -> None:
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Lo"}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "oking."}]}}]},
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"functionCall": {"name": "builtin__file-read", "args": {"path": "a"}}}
                        ],
                    }
                }
            ]
        },
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"functionCall": {"name": "t", "args": {}}}],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 6},
        },
    ]
    accumulator = ToolCallRouter("gemini").stream(iteration=2)
    assert [accumulator.feed(chunk) for chunk in chunks] == ["Lo", "oking.", "", ""]
    assert accumulator.result() == LLMResponse(
        content="Looking.",
        tool_calls=[
            ToolCall("call_2_0", "builtin/file-read", {"path": "a"}),
            ToolCall("call_2_1", "t", {}),
        ],
        usage=Usage(8, 6),
        stop_reason="STOP",
    )


@given(cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=8))
def test_openai_arguments_split_anywhere_parse_the_same(cuts: list[int]) -> None:
    arguments = json.dumps({"path": "dir/ä file.txt", "lines": [1, 2, 3], "flag": True})
    bounds = sorted({0, len(arguments), *(min(c, len(arguments)) for c in cuts)})
    accumulator = ToolCallRouter("openai").stream(iteration=1)
    accumulator.feed(_openai_chunk(_tool_delta(0, "", id="c", name="builtin__file-read")))
    for start, end in itertools.pairwise(bounds):
        accumulator.feed(_openai_chunk(_tool_delta(0, arguments[start:end])))
    assert accumulator.result().tool_calls == [
        ToolCall("c", "builtin/file-read", json.loads(arguments))
    ]
