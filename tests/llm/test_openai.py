"""OpenAIChatCaller through the real ``openai`` SDK against a loopback server: what only
the chat-completions API does (its request body, its quota error, reasoning_effort), and
a tool loop through the real runtime against a DeepSeek-style server in thinking mode
(``kit.fake_openai.FakeThinkingChat``, whose docstring quotes the rule it enforces: the
``reasoning_content`` of a tool-call turn must come back). What every provider does is
``test_provider_contract.py``'s."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cleveragents.llm import create_caller
from cleveragents.llm.builtin.openai import OpenAIChatCaller
from cleveragents.llm.errors import ModelConfigError, ModelProviderError
from cleveragents.llm.spec import ModelSpec, ReasoningSettings
from cleveragents.tool import LLMResponse, Message, ToolCall, ToolSchema, Usage
from cleveragents.tool import _codec_openai as chat_codec
from kit.fake_openai import FakeThinkingChat, run_loop
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


# -- reasoning -----------------------------------------------------------------------------

TODAYS_BODY = {
    "model": "gpt-test",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read a.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "builtin__file-read", "arguments": '{"path": "a"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "contents"},
    ],
    "stream": True,
    "stream_options": {"include_usage": True},
    "tools": [{"type": "function", "function": {
        "name": "builtin__file-read", "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}}],
    "max_tokens": 64,
}  # fmt: skip
"""A tool loop's second request as it was sent before reasoning existed."""


async def test_absent_reasoning_sends_todays_request_unchanged(server: LoopbackServer) -> None:
    history = [
        *HISTORY,
        Message(
            "assistant", "", tool_calls=[ToolCall("call_1", "builtin/file-read", {"path": "a"})]
        ),
        Message("tool", "contents", tool_call_id="call_1", name="builtin/file-read"),
    ]
    server.queue(openai_text_stream())
    call = caller(server, max_tokens=64)
    request = make_request(history, [READ], iteration=2)
    assert json.dumps(call.body(request)) == json.dumps(TODAYS_BODY)  # in the same order too
    await call(request)
    assert server.requests[0].body == TODAYS_BODY


async def test_reasoning_effort_is_sent_as_is_and_a_refusal_carries_the_providers_message(
    server: LoopbackServer,
) -> None:
    refusal = "Unsupported value: 'reasoning_effort' does not support 'minimal' with this model."
    server.queue(json_reply(openai_error_body(refusal, "unsupported_value"), 400))
    with pytest.raises(ModelProviderError) as info:
        await caller(server, reasoning=ReasoningSettings(effort="minimal", summary=True))(
            make_request(HISTORY)
        )
    assert info.value.message == f"openai:gpt-test: request rejected (HTTP 400): {refusal}"
    assert server.requests[0].body["reasoning_effort"] == "minimal"
    assert len(server.requests) == 1


def test_a_token_budget_is_refused_when_the_caller_is_built(server: LoopbackServer) -> None:
    with pytest.raises(ModelConfigError) as info:
        caller(server, reasoning=ReasoningSettings(effort="low", budget_tokens=1024))
    assert info.value.message == (
        "openai:gpt-test: OpenAI's APIs take reasoning.effort (minimal, low, medium or high), "
        "not budgetTokens"
    )


@pytest.fixture
def thinking() -> FakeThinkingChat:
    return FakeThinkingChat()


@pytest.fixture
def deepseek(thinking: FakeThinkingChat) -> Iterator[LoopbackServer]:
    with LoopbackServer(respond=thinking) as srv:
        yield srv


def thinking_caller(server: LoopbackServer) -> OpenAIChatCaller:
    made = create_caller(
        ModelSpec("openai", model="deepseek-test", base_url=server.base_url + "/v1",
                  reasoning=ReasoningSettings(effort="high"))
    )  # fmt: skip
    assert isinstance(made, OpenAIChatCaller)
    return made


async def test_a_five_iteration_tool_loop_passes_reasoning_content_back_to_a_thinking_server(
    deepseek: LoopbackServer, thinking: FakeThinkingChat
) -> None:
    looped = await run_loop(thinking_caller(deepseek))

    assert looped.result.content == "All done."
    assert looped.result.iterations == 6
    assert thinking.replies == [200] * 6
    # Every assistant message went back with the reasoning it came with, unchanged.
    assert thinking.returned == [thinking.thoughts[:n] for n in range(6)]
    assert {b.get("reasoning_effort") for b in thinking.requests} == {"high"}
    by_turn: dict[tuple[str, int], str] = {}
    for kind, iteration, text in looped.streamed():
        by_turn[kind, iteration] = by_turn.get((kind, iteration), "") + text
    assert by_turn == {
        **{("reasoning", n): thinking.thought(n) for n in range(1, 7)},
        ("text", 6): "All done.",
    }
    assert [k for k, i, _ in looped.streamed() if i == 6] == ["reasoning"] * 2 + ["text"] * 2
    assert "All done." not in "".join(t for k, _, t in looped.streamed() if k == "reasoning")


async def test_usage_comes_from_the_servers_details_fields(
    deepseek: LoopbackServer, thinking: FakeThinkingChat
) -> None:
    looped = await run_loop(thinking_caller(deepseek), system_prompt="Think first. " * 100)
    assert looped.usage() == [
        Usage(
            u["prompt_tokens"],
            u["completion_tokens"],
            cache_read_tokens=u["prompt_tokens_details"]["cached_tokens"],
            reasoning_tokens=u["completion_tokens_details"]["reasoning_tokens"],
        )
        for u in thinking.usages
    ]
    assert all(u["prompt_tokens_details"]["cached_tokens"] for u in thinking.usages[1:])


async def test_without_the_pass_back_the_same_loop_fails_with_the_servers_400(
    deepseek: LoopbackServer, thinking: FakeThinkingChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chat_codec, "_reasoning_back", lambda message: {})
    with pytest.raises(ModelProviderError) as info:
        await run_loop(thinking_caller(deepseek))
    assert info.value.message == (
        "openai:deepseek-test: request rejected (HTTP 400): "
        "The `reasoning_content` in the thinking mode must be passed back to the API."
    )
    assert thinking.replies == [200, 400]


async def test_reasoning_streamed_as_reasoning_goes_back_in_that_field(
    deepseek: LoopbackServer, thinking: FakeThinkingChat
) -> None:
    thinking.field = "reasoning"  # vLLM since 0.16: it reads back only this field
    thinking.enforce = False
    looped = await run_loop(thinking_caller(deepseek))

    assert looped.result.content == "All done."
    assert thinking.returned[-1] == thinking.thoughts[:5]
    for message in thinking.requests[-1]["messages"]:
        assert "reasoning_content" not in message
