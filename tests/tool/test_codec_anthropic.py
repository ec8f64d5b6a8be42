"""The Anthropic messages codec (``ToolCallRouter("anthropic")``): tool lists,
histories (``system`` apart, merged roles, thinking blocks sent back first), whole
responses and stream events (thinking kept as reasoning with its block as state).

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
    Reasoning,
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
        usage=Usage(25, 9, cache_read_tokens=2, cache_write_tokens=3),
        stop_reason="tool_use",
        reasoning=[Reasoning("hmm", {"type": "thinking", "thinking": "hmm", "signature": "s"})],
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


THOUGHT = {"type": "thinking", "thinking": "Read a first.", "signature": "sig-1"}
REDACTED = {"type": "redacted_thinking", "data": "ENCRYPTED"}


def test_anthropic_stream_keeps_thinking_as_reasoning_with_its_block_as_state() -> None:
    def delta(index: int, **fields: Any) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": fields}

    def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_start", "index": index, "content_block": block}

    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {
            "input_tokens": 5, "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 1000, "output_tokens": 1,
        }}},
        start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, type="thinking_delta", thinking="Read "),
        delta(0, type="thinking_delta", thinking="a first."),
        delta(0, type="signature_delta", signature="sig-1"),
        {"type": "content_block_stop", "index": 0},
        start(1, REDACTED),
        {"type": "content_block_stop", "index": 1},
        start(2, {"type": "text", "text": ""}),
        delta(2, type="text_delta", text="On it."),
        {"type": "content_block_stop", "index": 2},
        start(3, {"type": "tool_use", "id": "toolu_1", "name": "builtin__file-read", "input": {}}),
        delta(3, type="input_json_delta", partial_json='{"path": "a.txt"}'),
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {
            "output_tokens": 40, "output_tokens_details": {"thinking_tokens": 25},
        }},
    ]  # fmt: skip
    accumulator = ToolCallRouter("anthropic").stream(iteration=1)
    streamed = []
    for item in events:
        text = accumulator.feed(item)
        streamed.append(("reasoning", accumulator.take_reasoning()))
        streamed.append(("text", text))
    assert [s for s in streamed if s[1]] == [
        ("reasoning", "Read "), ("reasoning", "a first."), ("text", "On it."),
    ]  # fmt: skip
    assert accumulator.result() == LLMResponse(
        content="On it.",
        tool_calls=[ToolCall("toolu_1", "builtin/file-read", {"path": "a.txt"})],
        usage=Usage(1105, 40, cache_read_tokens=1000, cache_write_tokens=100, reasoning_tokens=25),
        stop_reason="tool_use",
        reasoning=[Reasoning("Read a first.", THOUGHT), Reasoning("", REDACTED)],
    )


def test_anthropic_history_sends_thinking_blocks_first_then_text_then_tool_use() -> None:
    """A block goes back exactly as it came, and as a copy: marking the request (cache
    breakpoints) must never change the conversation. Reasoning with no state, or state
    that is no thinking block, is not Anthropic's to send."""
    assistant = Message(
        "assistant",
        "Reading.",
        [ToolCall("c1", "builtin/file-read", {"path": "a.txt"})],
        reasoning=[
            Reasoning("Read a first.", THOUGHT),
            Reasoning("readable only"),
            Reasoning("", REDACTED),
            Reasoning("", {"thoughtSignature": "not ours"}),
        ],
        origin="anthropic:claude-x",
    )
    router = ToolCallRouter("anthropic", origin="anthropic:claude-x")
    [sent] = router.messages([assistant]).messages
    assert sent == {
        "role": "assistant",
        "content": [
            THOUGHT,
            REDACTED,
            {"type": "text", "text": "Reading."},
            {
                "type": "tool_use",
                "id": "c1",
                "name": "builtin__file-read",
                "input": {"path": "a.txt"},
            },
        ],
    }
    assert sent["content"][0] is not assistant.reasoning[0].state


def test_anthropic_history_of_another_model_goes_without_its_thinking_blocks() -> None:
    assistant = Message(
        "assistant", "Reading.", reasoning=[Reasoning("Read a first.", THOUGHT)],
        origin="anthropic:claude-x",
    )  # fmt: skip
    router = ToolCallRouter("anthropic", origin="anthropic:claude-y")
    assert router.messages([assistant]).messages == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "<thinking>\nRead a first.\n</thinking>\n\nReading."},
        ]},
    ]  # fmt: skip
