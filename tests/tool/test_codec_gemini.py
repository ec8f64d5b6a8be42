"""The Gemini codec (``ToolCallRouter("gemini")``): its name lead, tool lists with
cleaned schemas, histories (``model`` role, function parts), whole responses and
streamed ``GenerateContentResponse`` chunks, thought summaries and thought signatures.

Every mapping is checked by full-object equality against a literal payload. The
signature rules are Gemini's (ai.google.dev/gemini-api/docs/thought-signatures): "you
must return this signature in the exact part where it was received"; for parallel calls
"the thought_signature is attached only to the first functionCall part"; "the model may
return the thought signature in a part with an empty text content part" when streaming;
and (docs/thinking) "Don't merge one part with a signature with another part without a
signature."
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
    Reasoning,
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
        usage=Usage(30, 9, reasoning_tokens=4),
        stop_reason="STOP",
        reasoning=[Reasoning("thinking...")],
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


# -- reasoning, thought signatures and usage ---------------------------------------------


def gchunk(*parts: dict[str, Any], **candidate: Any) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": list(parts)}, **candidate}]}


def as_message(response: LLMResponse) -> Message:
    """The assistant message the loop keeps of a response."""
    return Message(
        "assistant",
        response.content,
        response.tool_calls,
        reasoning=response.reasoning,
        state=response.state,
        origin=response.origin,
    )


def test_gemini_usage_reports_cached_and_thought_tokens_from_its_own_fields() -> None:
    meta = {
        "promptTokenCount": 100,
        "cachedContentTokenCount": 80,
        "candidatesTokenCount": 5,
        "thoughtsTokenCount": 7,
        "totalTokenCount": 112,
    }
    response = ToolCallRouter("gemini").parse_response(
        {**gchunk({"text": "ok"}, finishReason="STOP"), "usageMetadata": meta}, iteration=1
    )
    # prompt includes the cached tokens; output includes the thoughts
    assert response.usage == Usage(100, 12, cache_read_tokens=80, reasoning_tokens=7)


def test_gemini_thought_summaries_stream_as_reasoning_before_the_answer() -> None:
    accumulator = ToolCallRouter("gemini").stream(iteration=1)
    seen = []
    for chunk in [
        gchunk({"text": "Plan: read", "thought": True}),
        gchunk({"text": " it first.", "thought": True}),
        gchunk({"text": "Done."}, finishReason="STOP"),
    ]:
        text = accumulator.feed(chunk)
        seen.append((accumulator.take_reasoning(), text))
    assert seen == [("Plan: read", ""), (" it first.", ""), ("", "Done.")]
    response = accumulator.result()
    assert response.content == "Done."
    assert response.reasoning == [Reasoning("Plan: read it first.")]
    assert response.state is None


def test_gemini_signatures_stay_with_the_call_part_they_came_on() -> None:
    accumulator = ToolCallRouter("gemini", origin="gemini:m").stream(iteration=3)
    for chunk in [
        gchunk({"text": "Both files.", "thought": True}),
        gchunk({"functionCall": {"name": "t", "args": {"n": 1}}, "thoughtSignature": "U0lHLUE="}),
        gchunk({"functionCall": {"name": "t", "args": {"n": 2}}}, finishReason="STOP"),
    ]:
        accumulator.feed(chunk)
    response = accumulator.result()
    assert response.tool_calls == [
        ToolCall("call_3_0", "t", {"n": 1}, state={"thoughtSignature": "U0lHLUE="}),
        ToolCall("call_3_1", "t", {"n": 2}),
    ]
    assert response.reasoning == [Reasoning("Both files.")]  # unsigned: nothing to send back
    sent = ToolCallRouter("gemini", origin="gemini:m").messages([as_message(response)])
    assert sent.messages == [
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "t", "args": {"n": 1}}, "thoughtSignature": "U0lHLUE="},
                {"functionCall": {"name": "t", "args": {"n": 2}}},
            ],
        }
    ]


def test_gemini_text_signature_on_an_empty_closing_part_goes_back_as_its_own_part() -> None:
    accumulator = ToolCallRouter("gemini", origin="gemini:m").stream(iteration=1)
    for chunk in [
        gchunk({"text": "Hel"}),
        gchunk({"text": "lo."}),
        gchunk({"text": "", "thoughtSignature": "VC1TSUc="}, finishReason="STOP"),
    ]:
        accumulator.feed(chunk)
    response = accumulator.result()
    assert response.content == "Hello."
    assert response.state == {
        "signedParts": [{"thoughtSignature": "VC1TSUc=", "length": 0, "after": 0}]
    }
    sent = ToolCallRouter("gemini", origin="gemini:m").messages([as_message(response)])
    assert sent.messages[0]["parts"] == [
        {"text": "Hello."},
        {"text": "", "thoughtSignature": "VC1TSUc="},
    ]


def test_gemini_signed_thought_and_text_parts_are_not_merged_with_unsigned_ones() -> None:
    """Gemini 2.5 signs the first part, whatever it is; text may follow it."""
    accumulator = ToolCallRouter("gemini", origin="gemini:m").stream(iteration=1)
    for chunk in [
        gchunk({"text": "Look", "thought": True, "thoughtSignature": "VEg="}),
        gchunk({"text": " closer.", "thought": True}),
        gchunk({"text": "It is ", "thoughtSignature": "VFg="}),
        gchunk({"text": "blue."}, finishReason="STOP"),
    ]:
        accumulator.feed(chunk)
    message = as_message(accumulator.result())
    sent = ToolCallRouter("gemini", origin="gemini:m").messages([message]).messages
    assert sent[0]["parts"] == [
        {"text": "Look", "thought": True, "thoughtSignature": "VEg="},
        {"text": " closer.", "thought": True},
        {"text": "It is ", "thoughtSignature": "VFg="},
        {"text": "blue."},
    ]
    # Another model reads the reasoning as text and gets no signature.
    foreign = ToolCallRouter("gemini", origin="gemini:other").messages([message]).messages
    assert foreign[0]["parts"] == [{"text": "<thinking>\nLook closer.\n</thinking>\n\nIt is blue."}]


_PART = st.tuples(
    st.booleans(),  # a thought part?
    st.text(alphabet="ab ", max_size=4),
    st.one_of(st.none(), st.text(alphabet="SIGsig0123=", min_size=1, max_size=6)),
)


def _merged(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts with neighbouring unsigned parts of one kind joined, empty unsigned ones
    gone: how unsigned text may be split is the stream's business, not the model's."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if "thoughtSignature" not in part and not part["text"]:
            continue
        last = out[-1] if out else None
        if (
            last is not None
            and "thoughtSignature" not in part
            and "thoughtSignature" not in last
            and last.get("thought") == part.get("thought")
        ):
            last["text"] += part["text"]
        else:
            out.append(dict(part))
    return out


@given(parts=st.lists(_PART, max_size=8))
def test_gemini_streamed_parts_go_back_as_they_came(
    parts: list[tuple[bool, str, str | None]],
) -> None:
    """Any stream of thought and text parts, signed or not, is sent back as received:
    each signed part whole and on its own, its signature unchanged, the unsigned text
    around it in order (thought text only when the thoughts carry a signature)."""
    ordered = sorted(parts, key=lambda p: not p[0])  # Gemini sends thoughts first
    received = [
        {"text": text, **({"thought": True} if thought else {})}
        | ({"thoughtSignature": sig} if sig else {})
        for thought, text, sig in ordered
    ]
    accumulator = ToolCallRouter("gemini", origin="gemini:m").stream(iteration=1)
    for part in received:
        accumulator.feed(gchunk(part))
    message = as_message(accumulator.result())
    sent = ToolCallRouter("gemini", origin="gemini:m").messages([message]).messages
    signed_thoughts = any(p.get("thought") and "thoughtSignature" in p for p in received)
    expected = _merged([p for p in received if signed_thoughts or not p.get("thought")])
    assert (sent[0]["parts"] if sent else []) == expected
