"""GeminiCaller through the real ``google-genai`` SDK against a loopback server that
speaks Gemini's REST shapes (``models/M:streamGenerateContent?alt=sse``): what only the
Gemini API does (its request, its cleaned schemas and name leads, its key variables, its
malformed chunks). What every provider does is ``test_provider_contract.py``'s."""

from __future__ import annotations

import logging
import traceback

import pytest

from cleveragents.llm.builtin.gemini import GeminiCaller
from cleveragents.llm.errors import ModelProviderError
from cleveragents.tool import LLMResponse, Message, ToolCall, ToolSchema, Usage
from kit.loopback import LoopbackServer, data, json_reply, make_request, sse_reply

from .kits import GEMINI, gemini_error_body, gemini_text_stream
from .kits import gemini_chunk as chunk

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


def caller(server: LoopbackServer, **spec_kw: object) -> GeminiCaller:
    made = GEMINI.caller(server, **spec_kw)
    assert isinstance(made, GeminiCaller)
    return made


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
    usage = Usage(12, 7, reasoning_tokens=2)  # thoughtsTokenCount, part of the output
    assert response == LLMResponse("Hello.", [], usage, "STOP", origin="gemini:gemini-test")
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
    server.queue(gemini_text_stream())
    await caller(server, max_tokens=256, temperature=0.5)(make_request(HISTORY))
    body = server.requests[0].body
    assert body["generationConfig"] == {"maxOutputTokens": 256, "temperature": 0.5}
    assert "tools" not in body


async def test_google_api_key_wins_as_in_the_sdk(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaGoogle-key")
    server.queue(gemini_text_stream())
    await caller(server)(make_request(HISTORY))
    assert server.requests[0].headers["x-goog-api-key"] == "AIzaGoogle-key"


async def test_a_chunk_that_is_not_json_is_a_provider_error(server: LoopbackServer) -> None:
    server.queue(sse_reply("data: {not json\n\n"), gemini_text_stream("unused"))
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


async def test_bad_credentials_fail_at_once_without_leaking_the_key(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = gemini_error_body(400, "INVALID_ARGUMENT", f"API key not valid: {KEY[:14]}... ({KEY})")
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
