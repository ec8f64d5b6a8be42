"""The Anthropic messages codec (``ToolCallRouter("anthropic")``): tool lists,
histories (``system`` apart, merged roles), whole responses and stream events.

Every mapping is checked by full-object equality against a literal payload.
"""

from __future__ import annotations

from typing import Any

import pytest
from toolkit import HISTORY, SCHEMAS

from cleveragents.tool import (
    LLMResponse,
    Message,
    ProviderStreamError,
    ToolCall,
    ToolCallRouter,
    Usage,
)
from cleveragents.tool._codec import ProviderMessages  # the router's own return type

# -- tool lists ------------------------------------------------------------------------


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


# -- histories -------------------------------------------------------------------------


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


# -- whole responses -------------------------------------------------------------------


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


# -- streams ---------------------------------------------------------------------------


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
