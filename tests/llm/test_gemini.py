"""GeminiCaller through the real ``google-genai`` SDK against a loopback server that
speaks Gemini's REST shapes (``models/M:streamGenerateContent?alt=sse``)."""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

import pytest

from cleveragents.llm.errors import ModelConfigError, ModelProviderError
from cleveragents.llm.gemini import GeminiCaller
from cleveragents.llm.spec import ModelSpec, create_caller
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

KEY = "AIzaTest-0123456789SECRET"
PATH = "/v1/models/gemini-test:streamGenerateContent?alt=sse"
READ = ToolSchema(
    "builtin/file-read",
    "Read a file.",
    {
        "type": "object",
        "properties": {"path": {"$ref": "#/$defs/path"}},
        "required": ["path"],
        "additionalProperties": False,
        "$defs": {"path": {"type": "string", "format": "uri-reference"}},
    },
)
HISTORY = [Message("system", "Be brief."), Message("user", "Read a.txt")]


def caller(server: LoopbackServer, **spec_kw: Any) -> GeminiCaller:
    sleep = spec_kw.pop("sleep", None)
    spec = ModelSpec("gemini", model="gemini-test", base_url=server.base_url, **spec_kw)
    tuning: dict[str, Any] = {"base_delay_s": 0.001, "max_delay_s": 0.002}
    if sleep is not None:
        tuning["sleep"] = sleep
    return GeminiCaller(spec, **tuning)


def chunk(*parts: dict[str, Any], finish: str | None = None, usage: bool = False) -> str:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
    if usage:
        body["usageMetadata"] = {
            "promptTokenCount": 12,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 2,
            "totalTokenCount": 19,
        }
    return data(body)


def text_stream(text: str = "Hello.") -> Reply:
    return sse_reply(chunk({"text": text}, finish="STOP", usage=True))


def error_body(status: int, name: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": name, **extra}}


def retry_info(delay: str) -> dict[str, Any]:
    return {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)


async def test_streams_a_plain_answer_with_usage(server: LoopbackServer) -> None:
    server.queue(
        sse_reply(
            chunk({"text": "Hel"}),
            chunk({"text": "", "thought": True}),
            chunk({"text": "lo."}, finish="STOP", usage=True),
        )
    )
    deltas: list[str] = []
    call = caller(server)
    response = await call(make_request(HISTORY, deltas=deltas))
    await call.aclose()
    assert deltas == ["Hel", "lo."]
    assert response == LLMResponse("Hello.", [], Usage(12, 7), "STOP")
    [sent] = server.requests
    assert sent.path == PATH
    assert sent.headers["x-goog-api-key"] == KEY
    assert sent.body == {
        "contents": [{"role": "user", "parts": [{"text": "Read a.txt"}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
        "generationConfig": {},
    }


async def test_a_tool_call_round_trip_sends_clean_schemas_and_decodes_names(
    server: LoopbackServer,
) -> None:
    odd = ToolSchema("9lives", "A name Gemini would refuse.", {"type": "object"})
    server.queue(
        sse_reply(
            chunk({"text": "Reading."}),
            chunk({"functionCall": {"name": "builtin__file-read", "args": {"path": "a.txt"}}}),
            chunk({"functionCall": {"name": "_-x9lives", "args": {}}}, finish="STOP"),
        )
    )
    history = [
        *HISTORY,
        Message("assistant", "", [ToolCall("c1", "builtin/file-read", {"path": "b.txt"})]),
        Message("tool", "no such file", tool_call_id="c1", is_error=True),
    ]
    response = await caller(server)(make_request(history, [READ, odd], iteration=3))
    assert response.tool_calls == [
        ToolCall("call_3_0", "builtin/file-read", {"path": "a.txt"}),
        ToolCall("call_3_1", "9lives", {}),
    ]
    body = server.requests[0].body
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "builtin__file-read", "args": {"path": "b.txt"}}}],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "builtin__file-read",
                        "response": {"error": "no such file"},
                    }
                }
            ],
        },
    ]
    [declarations] = [tool["functionDeclarations"] for tool in body["tools"]]
    assert [(d["name"], d["description"]) for d in declarations] == [
        ("builtin__file-read", "Read a file."),
        ("_-x9lives", "A name Gemini would refuse."),
    ]
    # the SDK writes the field in snake case; the API reads either
    assert declarations[0]["parameters_json_schema"] == {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }


async def test_max_tokens_and_temperature_come_from_the_spec(server: LoopbackServer) -> None:
    server.queue(text_stream())
    await caller(server, max_tokens=256, temperature=0.5)(make_request(HISTORY))
    body = server.requests[0].body
    assert body["generationConfig"] == {"maxOutputTokens": 256, "temperature": 0.5}
    assert "tools" not in body


def test_no_key_and_no_base_url_is_a_config_error_naming_both_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(ModelConfigError) as info:
        create_caller(ModelSpec("gemini", model="gemini-test"))
    assert info.value.code == ModelConfigError.code
    assert "GOOGLE_API_KEY or GEMINI_API_KEY" in info.value.message


async def test_google_api_key_wins_as_in_the_sdk(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaGoogle-key")
    server.queue(text_stream())
    await caller(server)(make_request(HISTORY))
    assert server.requests[0].headers["x-goog-api-key"] == "AIzaGoogle-key"


async def test_a_rate_limit_waits_as_retry_info_says_then_succeeds(
    server: LoopbackServer,
) -> None:
    exhausted = error_body(
        429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", **retry_info("1.5s")
    )
    server.queue(json_reply(exhausted, 429), text_stream("done"))
    sleep = RecordingSleep()
    response = await caller(server, sleep=sleep)(make_request(HISTORY))
    assert response.content == "done"
    assert sleep.delays == [1.5]


async def test_a_rate_limit_asking_for_an_hour_fails_at_once(server: LoopbackServer) -> None:
    exhausted = error_body(429, "RESOURCE_EXHAUSTED", "Daily quota.", **retry_info("3600s"))
    server.queue(json_reply(exhausted, 429))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert info.value.code == ModelProviderError.code
    assert "longer than the 60s limit" in info.value.message
    assert len(server.requests) == 1


async def test_unavailable_is_retried_then_gives_up_after_max_retries(
    server: LoopbackServer,
) -> None:
    busy = error_body(503, "UNAVAILABLE", "The model is overloaded.")
    server.queue(*[json_reply(busy, 503) for _ in range(3)])
    sleep = RecordingSleep()
    with pytest.raises(ModelProviderError) as info:
        await caller(server, max_retries=2, sleep=sleep)(make_request(HISTORY))
    assert info.value.code == ModelProviderError.code
    assert "provider error (HTTP 503) (gave up after 3 attempts)" in info.value.message
    assert len(sleep.delays) == 2


async def test_a_bad_request_carries_the_providers_short_reason(server: LoopbackServer) -> None:
    server.queue(json_reply(error_body(400, "INVALID_ARGUMENT", "Invalid schema."), 400))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "request rejected (HTTP 400): Invalid schema." in info.value.message


async def test_a_chunk_that_is_not_json_is_a_provider_error(server: LoopbackServer) -> None:
    server.queue(sse_reply("data: {not json\n\n"), text_stream("unused"))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert info.value.code == ModelProviderError.code
    assert "malformed response" in info.value.message
    assert len(server.requests) == 1


async def test_a_chunk_of_the_wrong_shape_is_a_provider_error(server: LoopbackServer) -> None:
    server.queue(sse_reply(data({"usageMetadata": {"promptTokenCount": "many"}})))
    with pytest.raises(ModelProviderError) as info:
        await caller(server)(make_request(HISTORY))
    assert "malformed response" in info.value.message


async def test_a_stream_without_a_finish_reason_is_retried(server: LoopbackServer) -> None:
    server.queue(sse_reply(chunk({"text": ""})), text_stream("whole"))
    response = await caller(server)(make_request(HISTORY))
    assert response.content == "whole"
    assert len(server.requests) == 2


async def test_a_hanging_server_times_out(server: LoopbackServer) -> None:
    server.queue(Reply(hang=True))
    with pytest.raises(ModelProviderError) as info:
        async with asyncio.timeout(WAIT_S):
            await caller(server, timeout_s=0.2, max_retries=0)(make_request(HISTORY))
    assert "no response within 0.2s" in info.value.message


async def test_cancel_aborts_the_in_flight_stream_promptly(server: LoopbackServer) -> None:
    server.queue(sse_reply(chunk({"text": "Thinking"}), hang=True))
    token = CancelToken()
    first_delta = asyncio.Event()
    request = make_request(HISTORY, cancel=token)
    request.on_delta = lambda _text: first_delta.set()
    task = asyncio.create_task(caller(server)(request))
    async with asyncio.timeout(WAIT_S):
        await first_delta.wait()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(WAIT_S):
            await task
    assert await asyncio.to_thread(server.client_left.wait, WAIT_S)


async def test_bad_credentials_fail_at_once_without_leaking_the_key(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = error_body(400, "INVALID_ARGUMENT", f"API key not valid: {KEY[:14]}... ({KEY})")
    server.queue(json_reply(echo, 400), json_reply(echo, 403))
    failures = []
    for _ in range(2):
        with pytest.raises(ModelProviderError) as info:
            await caller(server)(make_request(HISTORY))
        failures.append(info.value)
    assert "authentication failed (HTTP 403): check GEMINI_API_KEY" in failures[1].message
    assert len(server.requests) == 2
    for exc in failures:
        shown = [str(exc), repr(exc), "".join(traceback.format_exception(exc)), caplog.text]
        for text in shown:
            assert KEY[:6] not in text
            assert "SECRET" not in text


async def test_calls_and_runs_share_one_connection_until_the_caller_is_closed() -> None:
    with LoopbackServer(keep_alive=True) as server:
        server.queue(text_stream("one"), text_stream("two"), text_stream("three"))
        call = caller(server)
        assert (await call(make_request(HISTORY))).content == "one"
        assert (await call(make_request(HISTORY, iteration=2))).content == "two"
        assert server.connections == 1
        await call.aclose()
        assert (await call(make_request(HISTORY))).content == "three"
        assert server.connections == 2
        await call.aclose()
