"""OpenAIChatCaller through the real ``openai`` SDK against a loopback server."""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from typing import Any

import pytest

from cleveragents.llm.errors import ModelConfigError, ModelProviderError
from cleveragents.llm.openai import OpenAIChatCaller
from cleveragents.llm.spec import ModelSpec
from cleveragents.tool import CancelToken, LLMResponse, Message, ToolCall, ToolSchema, Usage

from .loopback import (
    WAIT_S,
    LoopbackServer,
    RecordingSleep,
    Reply,
    data,
    json_reply,
    make_request,
    sse_reply,
)

KEY = "sk-test-0123456789abcdefSECRET"
READ = ToolSchema(
    "builtin/file-read",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
HISTORY = [Message("system", "Be brief."), Message("user", "Read a.txt")]


def caller(server: LoopbackServer, **spec_kw: Any) -> OpenAIChatCaller:
    sleep = spec_kw.pop("sleep", None)
    spec = ModelSpec("openai", model="gpt-test", base_url=f"{server.base_url}/v1", **spec_kw)
    tuning: dict[str, Any] = {"base_delay_s": 0.001, "max_delay_s": 0.002}
    if sleep is not None:
        tuning["sleep"] = sleep
    return OpenAIChatCaller(spec, **tuning)


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return data(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def usage_chunk(prompt: int, completion: int) -> str:
    return data(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
    )


def text_stream(text: str = "Hello.") -> Any:
    return sse_reply(
        chunk({"role": "assistant", "content": text}, finish="stop"),
        usage_chunk(3, 1),
        "data: [DONE]\n\n",
    )


def error_body(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


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
            usage_chunk(42, 17),
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
    server.queue(text_stream())
    await caller(server, max_tokens=64, temperature=0.2)(make_request(HISTORY))
    body = server.requests[0].body
    assert (body["max_tokens"], body["temperature"]) == (64, 0.2)
    assert "tools" not in body


async def test_a_keyless_local_server_needs_no_api_key(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    server.queue(text_stream("hi"))
    response = await caller(server)(make_request(HISTORY))
    assert response.content == "hi"
    assert server.requests[0].headers["authorization"] == "Bearer no-key"


def test_no_key_and_no_base_url_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ModelConfigError) as info:
        OpenAIChatCaller(ModelSpec("openai", model="gpt-test"))
    assert info.value.code == ModelConfigError.code
    assert "OPENAI_API_KEY" in info.value.message


async def test_the_key_comes_from_api_key_env_when_set(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "gw-key-1")
    server.queue(text_stream())
    await caller(server, api_key_env="MY_GATEWAY_KEY")(make_request(HISTORY))
    assert server.requests[0].headers["authorization"] == "Bearer gw-key-1"


async def test_rate_limit_waits_as_retry_after_says_then_succeeds(server: LoopbackServer) -> None:
    server.queue(
        json_reply(error_body("slow down", "rate_limit_exceeded"), 429, **{"Retry-After": "7"}),
        text_stream("done"),
    )
    sleep = RecordingSleep()
    response = await caller(server, sleep=sleep)(make_request(HISTORY))
    assert response.content == "done"
    assert sleep.delays == [7.0]
    assert len(server.requests) == 2


async def test_server_errors_back_off_exponentially_then_succeed(server: LoopbackServer) -> None:
    server.queue(
        json_reply({"error": {"message": "oops"}}, 500),
        json_reply({"error": {"message": "oops"}}, 502),
        text_stream("ok"),
    )
    sleep = RecordingSleep()
    spec = ModelSpec("openai", model="gpt-test", base_url=server.base_url)
    response = await OpenAIChatCaller(spec, base_delay_s=1.0, max_delay_s=8.0, sleep=sleep)(
        make_request(HISTORY)
    )
    assert response.content == "ok"
    first, second = sleep.delays
    assert 0.75 <= first <= 1.0
    assert 1.5 <= second <= 2.0


async def test_repeated_server_errors_give_up_after_max_retries(server: LoopbackServer) -> None:
    server.queue(*[json_reply({"error": {"message": "down"}}, 503) for _ in range(3)])
    with pytest.raises(ModelProviderError) as info:
        await caller(server, max_retries=2)(make_request(HISTORY))
    assert info.value.code == ModelProviderError.code
    assert "gave up after 3 attempts" in info.value.message
    assert len(server.requests) == 3


async def test_a_retry_after_beyond_the_limit_fails_at_once(server: LoopbackServer) -> None:
    server.queue(json_reply(error_body("later"), 429, **{"Retry-After": "3600"}))
    with pytest.raises(ModelProviderError):
        await caller(server)(make_request(HISTORY))
    assert len(server.requests) == 1


async def test_an_exhausted_quota_is_not_retried(server: LoopbackServer) -> None:
    server.queue(
        json_reply(error_body("You exceeded your current quota", "insufficient_quota"), 429)
    )
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "quota" in info.value.message
    assert len(server.requests) == 1


async def test_bad_credentials_fail_at_once_without_leaking_the_key(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {KEY}. You can find your API key at ..."
    server.queue(json_reply(error_body(echo, "invalid_api_key"), 401))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    exc = info.value
    assert exc.code == ModelProviderError.code
    assert "authentication failed" in exc.message
    assert "OPENAI_API_KEY" in exc.message
    assert len(server.requests) == 1
    for text in (str(exc), repr(exc), "".join(traceback.format_exception(exc)), caplog.text):
        assert KEY not in text
        assert "SECRET" not in text
    assert "sk-" not in str(exc)


async def test_an_unknown_model_is_reported_as_not_found(server: LoopbackServer) -> None:
    server.queue(
        json_reply(error_body("The model `gpt-nope` does not exist", "model_not_found"), 404)
    )
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "not found" in info.value.message
    assert len(server.requests) == 1


async def test_context_overflow_is_reported_as_such(server: LoopbackServer) -> None:
    message = "This model's maximum context length is 8192 tokens. However, you requested 9000."
    server.queue(json_reply(error_body(message, "context_length_exceeded"), 400))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "context window" in info.value.message
    assert len(server.requests) == 1


async def test_other_rejections_carry_the_providers_short_reason(server: LoopbackServer) -> None:
    server.queue(json_reply(error_body("Invalid schema for function 'x'"), 400))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "Invalid schema for function 'x'" in info.value.message


async def test_a_hanging_server_times_out(server: LoopbackServer) -> None:
    server.queue(Reply(hang=True))
    with pytest.raises(ModelProviderError) as info:
        async with asyncio.timeout(WAIT_S):
            await caller(server, timeout_s=0.2, max_retries=0)(make_request(HISTORY))
    assert "no response within 0.2s" in info.value.message


async def test_a_timeout_is_retried_within_the_bound(server: LoopbackServer) -> None:
    server.queue(Reply(hang=True), text_stream("late but fine"))
    async with asyncio.timeout(WAIT_S):
        response = await caller(server, timeout_s=0.2, max_retries=1)(make_request(HISTORY))
    assert response.content == "late but fine"


async def test_cancel_aborts_the_in_flight_stream_promptly(server: LoopbackServer) -> None:
    server.queue(sse_reply(chunk({"role": "assistant", "content": "Thinking"}), hang=True))
    token = CancelToken()
    first_delta = asyncio.Event()
    request = make_request(HISTORY, cancel=token)
    request.on_delta = lambda _text: first_delta.set()
    task = asyncio.create_task(caller(server)(request))
    async with asyncio.timeout(WAIT_S):
        await first_delta.wait()
    # the token fires from another thread, as a daemon's cancel would
    threading.Thread(target=token.cancel).start()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(WAIT_S):
            await task
    assert await asyncio.to_thread(server.client_left.wait, WAIT_S)


async def test_an_already_cancelled_token_sends_nothing(server: LoopbackServer) -> None:
    token = CancelToken()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller(server)(make_request(HISTORY, cancel=token))
    assert server.requests == []


async def test_a_connection_cut_after_text_is_not_retried(server: LoopbackServer) -> None:
    cut = sse_reply(chunk({"role": "assistant", "content": "Partial"}), "data: {brok", cut=True)
    server.queue(cut, text_stream("should not be used"))
    deltas: list[str] = []
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY, deltas=deltas))
    assert info.value.code == ModelProviderError.code
    assert deltas == ["Partial"]
    assert len(server.requests) == 1


async def test_a_stream_that_ends_before_the_model_finished_is_an_error(
    server: LoopbackServer,
) -> None:
    server.queue(sse_reply(chunk({"role": "assistant", "content": "Half"})))
    with pytest.raises(ModelProviderError) as info:
        await caller(server, max_retries=0)(make_request(HISTORY))
    assert "ended before" in info.value.message


async def test_a_stream_that_ends_early_before_any_text_is_retried(server: LoopbackServer) -> None:
    server.queue(sse_reply(chunk({"role": "assistant", "content": ""})), text_stream("whole"))
    response = await caller(server)(make_request(HISTORY))
    assert response.content == "whole"
    assert len(server.requests) == 2


async def test_history_with_tool_results_is_sent_in_chat_format(server: LoopbackServer) -> None:
    history = [
        *HISTORY,
        Message(
            "assistant", "", tool_calls=[ToolCall("call_1", "builtin/file-read", {"path": "a"})]
        ),
        Message("tool", "contents", tool_call_id="call_1", name="builtin/file-read"),
    ]
    server.queue(text_stream())
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


async def test_a_successful_call_logs_nothing_of_the_key(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.queue(json_reply(error_body("busy"), 503), text_stream("fine"))
    await caller(server)(make_request(HISTORY))
    assert "retry 1 of 3" in caplog.text
    assert KEY not in caplog.text
    assert "SECRET" not in caplog.text
