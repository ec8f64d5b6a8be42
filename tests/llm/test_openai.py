"""OpenAIChatCaller through the real ``openai`` SDK against a loopback server: what only
the chat-completions API does (its request body, its quota error). What every provider
does is ``test_provider_contract.py``'s."""

from __future__ import annotations

import pytest

from cleveragents.llm.builtin.openai import OpenAIChatCaller
from cleveragents.llm.errors import ModelProviderError
from cleveragents.tool import LLMResponse, Message, ToolCall, ToolSchema, Usage
from kit.loopback import LoopbackServer, json_reply, make_request, sse_reply

from .kits import OPENAI, openai_error_body, openai_text_stream, openai_usage_chunk
from .kits import openai_chunk as chunk

KEY = "sk-test-0123456789abcdefSECRET"
READ = ToolSchema(
    "builtin/file-read",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
HISTORY = [Message("system", "Be brief."), Message("user", "Read a.txt")]


def caller(server: LoopbackServer, **spec_kw: object) -> OpenAIChatCaller:
    made = OPENAI.caller(server, **spec_kw)
    assert isinstance(made, OpenAIChatCaller)
    return made


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


async def test_streams_text_and_tool_calls_split_mid_json_with_usage(
    server: LoopbackServer,
) -> None:
    call = {"index": 0, "id": "call_1", "type": "function"}
    split_event = chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'a.txt"}'}}]})
    server.queue(
        sse_reply(
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Let me "}),
            chunk({"content": "look."}),
            chunk(
                {
                    "tool_calls": [
                        {**call, "function": {"name": "builtin__file-read", "arguments": ""}}
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "'}}]}),
            # one SSE event split across two HTTP chunks, mid-JSON
            split_event[:25],
            split_event[25:],
            chunk({}, finish="tool_calls"),
            openai_usage_chunk(42, 17),
            "data: [DONE]\n\n",
        )
    )
    deltas: list[str] = []
    response = await caller(server)(make_request(HISTORY, [READ], deltas=deltas))
    assert deltas == ["Let me ", "look."]
    assert response == LLMResponse(
        content="Let me look.",
        tool_calls=[ToolCall("call_1", "builtin/file-read", {"path": "a.txt"})],
        usage=Usage(42, 17),
        stop_reason="tool_calls",
        origin="openai:gpt-test",
    )
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Read a.txt"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
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
            }
        ],
    }


async def test_max_tokens_and_temperature_reach_a_compatible_server(server: LoopbackServer) -> None:
    server.queue(openai_text_stream())
    await caller(server, max_tokens=64, temperature=0.2)(make_request(HISTORY))
    body = server.requests[0].body
    assert (body["max_tokens"], body["temperature"]) == (64, 0.2)
    assert "tools" not in body


async def test_an_exhausted_quota_is_not_retried(server: LoopbackServer) -> None:
    server.queue(
        json_reply(openai_error_body("You exceeded your current quota", "insufficient_quota"), 429)
    )
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "quota" in info.value.message
    assert len(server.requests) == 1


async def test_history_with_tool_results_is_sent_in_chat_format(server: LoopbackServer) -> None:
    history = [
        *HISTORY,
        Message(
            "assistant", "", tool_calls=[ToolCall("call_1", "builtin/file-read", {"path": "a"})]
        ),
        Message("tool", "contents", tool_call_id="call_1", name="builtin/file-read"),
    ]
    server.queue(openai_text_stream())
    await caller(server)(make_request(history, [READ], iteration=2))
    assert server.requests[0].body["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "builtin__file-read", "arguments": '{"path": "a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "contents"},
    ]
