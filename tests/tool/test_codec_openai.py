"""The OpenAI chat-completions codec (``ToolCallRouter("openai")``): tool lists,
histories, whole responses and ``chat.completion.chunk`` streams.

Every mapping is checked by full-object equality against a literal payload.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

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
    Usage,
)
from cleveragents.tool._codec import ProviderMessages  # the router's own return type

# -- tool lists ------------------------------------------------------------------------


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


def test_openai_sends_the_schema_as_it_is() -> None:
    schema = {"type": "object", "additionalProperties": False, "$defs": {}}
    [tool] = ToolCallRouter("openai").tools([ToolSchema("t", "d", schema)])
    assert tool["function"]["parameters"] == schema


# -- histories -------------------------------------------------------------------------


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


# -- whole responses -------------------------------------------------------------------


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


# -- streams ---------------------------------------------------------------------------


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


# -- reasoning and usage ---------------------------------------------------------------


def test_reasoning_content_streams_as_reasoning_and_remembers_its_field() -> None:
    accumulator = ToolCallRouter("openai").stream(iteration=1)
    said = []
    for delta in (
        {"role": "assistant", "content": None, "reasoning_content": ""},
        {"content": None, "reasoning_content": "Read "},
        {"content": None, "reasoning_content": "it first."},
        {"content": "Reading.", "reasoning_content": None},
    ):
        text = accumulator.feed(_openai_chunk(delta))
        said.append((accumulator.take_reasoning(), text))
    accumulator.feed(_openai_chunk({}, finish="stop"))
    assert said == [("", ""), ("Read ", ""), ("it first.", ""), ("", "Reading.")]
    assert accumulator.result() == LLMResponse(
        content="Reading.",
        stop_reason="stop",
        reasoning=[Reasoning("Read it first.", {"field": "reasoning_content"})],
    )


def test_a_server_filling_both_reasoning_fields_is_read_once() -> None:
    accumulator = ToolCallRouter("openai").stream(iteration=1)
    accumulator.feed(_openai_chunk({"reasoning_content": "Hm.", "reasoning": "Hm."}))
    accumulator.feed(_openai_chunk({"reasoning": "Ok."}, finish="stop"))
    assert accumulator.result().reasoning == [Reasoning("Hm.Ok.", {"field": "reasoning_content"})]


def test_reasoning_goes_back_in_its_field_on_the_assistant_message() -> None:
    call = ToolCall("c1", "t", {})
    history = [
        Message("assistant", "", [call], reasoning=[Reasoning("Why.", {"field": "reasoning"})]),
        Message("tool", "ok", tool_call_id="c1"),
        Message("assistant", "Done.",
                reasoning=[Reasoning("So.", {"field": "reasoning_content"})]),
        Message("assistant", "Plain.", reasoning=[Reasoning("Not ours.")]),
    ]  # fmt: skip
    assert ToolCallRouter("openai").messages(history).messages == [
        {"role": "assistant", "content": None, "reasoning": "Why.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "Done.", "reasoning_content": "So."},
        {"role": "assistant", "content": "Plain."},
    ]  # fmt: skip


def test_another_models_reasoning_goes_as_text_not_in_the_field() -> None:
    message = Message(
        "assistant", "Done.", reasoning=[Reasoning("So.", {"field": "reasoning_content"})],
        origin="openai:deepseek-reasoner",
    )  # fmt: skip
    router = ToolCallRouter("openai", origin="openai:gpt-4o")
    assert router.messages([message]).messages == [
        {"role": "assistant", "content": "<thinking>\nSo.\n</thinking>\n\nDone."}
    ]


def test_usage_reads_cached_and_reasoning_tokens_from_the_details() -> None:
    accumulator = ToolCallRouter("openai").stream(iteration=1)
    accumulator.feed(_openai_chunk({"content": "x"}, finish="stop"))
    accumulator.feed({"choices": [], "usage": {
        "prompt_tokens": 900, "completion_tokens": 300,
        "prompt_tokens_details": {"cached_tokens": 768, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 256},
    }})  # fmt: skip
    assert accumulator.result().usage == Usage(900, 300, 768, None, 256)


def test_usage_takes_deepseeks_cache_hits_when_there_are_no_details() -> None:
    accumulator = ToolCallRouter("openai").stream(iteration=1)
    accumulator.feed(_openai_chunk({"content": "x"}, finish="stop"))
    accumulator.feed({"choices": [], "usage": {
        "prompt_tokens": 100, "completion_tokens": 5,
        "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36,
    }})  # fmt: skip
    assert accumulator.result().usage == Usage(100, 5, cache_read_tokens=64)


def test_a_whole_response_keeps_its_reasoning_content() -> None:
    payload = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "Hi", "reasoning_content": "Greet."}}]}  # fmt: skip
    assert ToolCallRouter("openai").parse_response(payload, iteration=1) == LLMResponse(
        content="Hi",
        stop_reason="stop",
        reasoning=[Reasoning("Greet.", {"field": "reasoning_content"})],
    )
