"""AnthropicCaller through the real ``anthropic`` SDK against a loopback server."""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

import pytest

from cleveragents.llm.anthropic import AnthropicCaller
from cleveragents.llm.errors import ModelConfigError, ModelProviderError
from cleveragents.llm.spec import ModelSpec
from cleveragents.tool import CancelToken, LLMResponse, Message, ToolCall, ToolSchema, Usage

from .loopback import (
    WAIT_S,
    LoopbackServer,
    RecordingSleep,
    Reply,
    event,
    json_reply,
    make_request,
    sse_reply,
)

KEY = "sk-ant-test-0123456789SECRET"
READ = ToolSchema(
    "builtin/file-read",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
HISTORY = [
    Message("system", "Be brief."),
    Message("user", "Read a.txt"),
    Message(
        "assistant",
        "Reading.",
        tool_calls=[ToolCall("toolu_0", "server:local/tool", {"q": 1})],
    ),
    Message("tool", "denied", tool_call_id="toolu_0", name="server:local/tool", is_error=True),
]


def caller(server: LoopbackServer, **spec_kw: Any) -> AnthropicCaller:
    sleep = spec_kw.pop("sleep", None)
    spec = ModelSpec("anthropic", model="claude-test", base_url=server.base_url, **spec_kw)
    tuning: dict[str, Any] = {"base_delay_s": 0.001, "max_delay_s": 0.002}
    if sleep is not None:
        tuning["sleep"] = sleep
    return AnthropicCaller(spec, **tuning)


def message_start(input_tokens: int = 10) -> str:
    return event(
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        }
    )


def text_block(index: int, *pieces: str) -> list[str]:
    start = {"type": "text", "text": ""}
    return [
        event({"type": "content_block_start", "index": index, "content_block": start}),
        *(
            event(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
            )
            for piece in pieces
        ),
        event({"type": "content_block_stop", "index": index}),
    ]


def message_end(stop: str, output_tokens: int) -> list[str]:
    return [
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            }
        ),
        event({"type": "message_stop"}),
    ]


def text_stream(text: str = "Hello.") -> Reply:
    return sse_reply(message_start(), *text_block(0, text), *message_end("end_turn", 2))


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


async def test_streams_text_and_tool_input_split_mid_json_with_usage(
    server: LoopbackServer,
) -> None:
    tool_start = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "builtin__file-read",
        "input": {},
    }
    fragments = ["", '{"pa', 'th": "a.', 'txt"}']
    server.queue(
        sse_reply(
            message_start(input_tokens=120),
            event({"type": "ping"}),
            *text_block(0, "Let me ", "look."),
            event({"type": "content_block_start", "index": 1, "content_block": tool_start}),
            *(
                event(
                    {
                        "type": "content_block_delta",
                        "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": fragment},
                    }
                )
                for fragment in fragments
            ),
            event({"type": "content_block_stop", "index": 1}),
            *message_end("tool_use", 31),
        )
    )
    deltas: list[str] = []
    response = await caller(server)(make_request(HISTORY, [READ], deltas=deltas, iteration=2))
    assert deltas == ["Let me ", "look."]
    assert response == LLMResponse(
        content="Let me look.",
        tool_calls=[ToolCall("toolu_1", "builtin/file-read", {"path": "a.txt"})],
        usage=Usage(120, 31),
        stop_reason="tool_use",
    )
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    auth = sent.headers.get("x-api-key") or sent.headers["authorization"].removeprefix("Bearer ")
    assert auth == KEY
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "stream": True,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading."},
                    {
                        "type": "tool_use",
                        "id": "toolu_0",
                        "name": "server_-clocal__tool",
                        "input": {"q": 1},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_0",
                        "content": "denied",
                        "is_error": True,
                    }
                ],
            },
        ],
        "tools": [
            {
                "name": "builtin__file-read",
                "description": "Read a file.",
                "input_schema": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            }
        ],
    }


async def test_max_tokens_and_temperature_come_from_the_spec(server: LoopbackServer) -> None:
    server.queue(text_stream())
    await caller(server, max_tokens=256, temperature=0.5)(make_request(HISTORY[:2]))
    body = server.requests[0].body
    assert (body["max_tokens"], body["temperature"]) == (256, 0.5)
    assert "tools" not in body


def test_no_key_and_no_base_url_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ModelConfigError) as info:
        AnthropicCaller(ModelSpec("anthropic", model="claude-test"))
    assert "ANTHROPIC_API_KEY" in info.value.message


async def test_rate_limit_honours_retry_after_ms_then_succeeds(server: LoopbackServer) -> None:
    server.queue(
        json_reply(error_body("rate_limit_error", "slow down"), 429, **{"retry-after-ms": "1500"}),
        text_stream("done"),
    )
    sleep = RecordingSleep()
    response = await caller(server, sleep=sleep)(make_request(HISTORY))
    assert response.content == "done"
    assert sleep.delays == [1.5]


async def test_overloaded_responses_give_up_after_max_retries(server: LoopbackServer) -> None:
    server.queue(*[json_reply(error_body("overloaded_error", "busy"), 529) for _ in range(4)])
    with pytest.raises(ModelProviderError) as info:
        await caller(server, max_retries=3)(make_request(HISTORY))
    assert info.value.code == ModelProviderError.code
    assert "gave up after 4 attempts" in info.value.message
    assert len(server.requests) == 4


async def test_an_error_event_before_any_text_is_retried(server: LoopbackServer) -> None:
    server.queue(
        sse_reply(message_start(), event(error_body("overloaded_error", "Overloaded"))),
        text_stream("second time"),
    )
    response = await caller(server)(make_request(HISTORY))
    assert response.content == "second time"
    assert len(server.requests) == 2


async def test_an_error_event_after_text_is_final(server: LoopbackServer) -> None:
    server.queue(
        sse_reply(
            message_start(),
            *text_block(0, "Part"),
            event(error_body("overloaded_error", "Overloaded")),
        ),
        text_stream("unused"),
    )
    deltas: list[str] = []
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY, deltas=deltas))
    assert "mid-stream" in info.value.message
    assert deltas == ["Part"]
    assert len(server.requests) == 1


async def test_bad_credentials_fail_at_once_without_leaking_the_key(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.queue(json_reply(error_body("authentication_error", f"invalid x-api-key {KEY}"), 401))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    exc = info.value
    assert "authentication failed" in exc.message
    assert "ANTHROPIC_API_KEY" in exc.message
    assert len(server.requests) == 1
    for text in (str(exc), repr(exc), "".join(traceback.format_exception(exc)), caplog.text):
        assert KEY not in text
        assert "SECRET" not in text


async def test_a_forbidden_key_is_an_authentication_failure(server: LoopbackServer) -> None:
    server.queue(json_reply(error_body("permission_error", "no access"), 403))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "authentication failed (HTTP 403)" in info.value.message


async def test_an_unknown_model_is_reported_as_not_found(server: LoopbackServer) -> None:
    server.queue(json_reply(error_body("not_found_error", "model: claude-nope"), 404))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "not found" in info.value.message


async def test_a_prompt_that_is_too_long_is_reported_as_context_overflow(
    server: LoopbackServer,
) -> None:
    too_long = "prompt is too long: 210000 tokens > 200000 maximum"
    server.queue(json_reply(error_body("invalid_request_error", too_long), 400))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "context window" in info.value.message
    assert len(server.requests) == 1


async def test_a_hanging_server_times_out(server: LoopbackServer) -> None:
    server.queue(Reply(hang=True))
    with pytest.raises(ModelProviderError) as info:
        async with asyncio.timeout(WAIT_S):
            await caller(server, timeout_s=0.2, max_retries=0)(make_request(HISTORY))
    assert "no response within 0.2s" in info.value.message


async def test_cancel_aborts_a_request_still_waiting_for_headers(server: LoopbackServer) -> None:
    server.queue(Reply(hang=True))
    token = CancelToken()
    task = asyncio.create_task(caller(server)(make_request(HISTORY, cancel=token)))
    assert await asyncio.to_thread(server.request_seen.wait, WAIT_S)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(WAIT_S):
            await task
    assert await asyncio.to_thread(server.client_left.wait, WAIT_S)


async def test_cancel_during_a_retry_wait_stops_at_once(server: LoopbackServer) -> None:
    server.queue(json_reply(error_body("overloaded_error", "busy"), 529))
    waiting = asyncio.Event()

    async def long_sleep(delay: float) -> None:
        waiting.set()
        await asyncio.sleep(delay)

    token = CancelToken()
    spec = ModelSpec("anthropic", model="claude-test", base_url=server.base_url)
    slow = AnthropicCaller(spec, base_delay_s=30.0, max_delay_s=30.0, sleep=long_sleep)
    task = asyncio.create_task(slow(make_request(HISTORY, cancel=token)))
    async with asyncio.timeout(WAIT_S):
        await waiting.wait()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(WAIT_S):
            await task
    assert len(server.requests) == 1
