"""The Gemini codec (``ToolCallRouter("gemini")``): its name lead, tool lists with
cleaned schemas, histories (``model`` role, function parts), whole responses and
streamed ``GenerateContentResponse`` chunks.

Every mapping is checked by full-object equality against a literal payload.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolkit import HISTORY, SCHEMAS

from cleveragents.tool import (
    LLMResponse,
    Message,
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


# -- names -----------------------------------------------------------------------------


def test_gemini_names_that_start_with_a_digit_or_dash_get_a_letter_safe_lead() -> None:
    gemini, openai = ToolCallRouter("gemini"), ToolCallRouter("openai")
    assert gemini.encode_name("9lives") == "_-x9lives"
    assert gemini.encode_name("-dash") == "_-x-dash"
    assert gemini.decode_name("_-x9lives") == "9lives"
    assert openai.encode_name("9lives") == "9lives"


@given(name=st.text(alphabet=NAME_CHARS, min_size=1, max_size=128))
def test_every_gemini_name_starts_with_a_letter_or_underscore(name: str) -> None:
    router = ToolCallRouter("gemini")
    encoded = router.encode_name(name)
    assert SAFE.fullmatch(encoded)
    assert encoded[0].isalpha() or encoded[0] == "_"
    assert router.decode_name(encoded) == name


# -- tool lists ------------------------------------------------------------------------


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


# -- histories -------------------------------------------------------------------------


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


# -- whole responses -------------------------------------------------------------------


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


# -- streams ---------------------------------------------------------------------------


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
