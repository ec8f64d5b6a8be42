"""A call's own settings (``LLMRequest.settings``: what an MCP server's sampling request
asks for) reach each provider's request body in that provider's words, for that call
only; the spec's ``maxTokens`` still caps them; what a provider cannot take (stop
sequences on the Responses API, temperature and stop beside reasoning) is left out
rather than failing the call. Seen on the wire, through the real SDKs, on loopback."""

from __future__ import annotations

from typing import Any

import pytest

from cleveragents.llm.spec import ReasoningSettings
from cleveragents.tool import CallSettings, Message
from kit.loopback import LoopbackServer, make_request
from llm.kits import KITS, Kit

FIVE = ("END", "STOP", "###", "\n\n", "Q:", "A:")
"""Six stop sequences: more than OpenAI's four and Gemini's five."""


def settings(**kw: Any) -> CallSettings:
    return CallSettings(**{"max_tokens": 50, "temperature": 0.3, "stop": ("END",), **kw})


async def sent_body(
    kit: Kit, monkeypatch: pytest.MonkeyPatch, call: CallSettings | None, **spec: Any
) -> dict[str, Any]:
    """The JSON body the provider got for one call with ``call`` as its settings."""
    kit.set_key(monkeypatch, "sk-test-key-0123456789")
    with LoopbackServer() as server:
        server.queue(kit.text_stream("Hi."))
        caller = kit.caller(server, **spec)
        try:
            request = make_request([Message("user", "Say hi.")])
            request.settings = call
            response = await caller(request)
        finally:
            await caller.aclose()
    assert response.content == "Hi."
    (recorded,) = server.requests
    body: dict[str, Any] = recorded.body
    return body


def generation(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = body.get("generationConfig") or {}
    return config


async def test_openai_chat_takes_max_tokens_temperature_and_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = await sent_body(KITS["openai"], monkeypatch, settings())
    assert (body["max_tokens"], body["temperature"], body["stop"]) == (50, 0.3, ["END"])


async def test_openai_chat_takes_its_first_four_stop_sequences(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = await sent_body(KITS["openai"], monkeypatch, settings(stop=FIVE))
    assert body["stop"] == list(FIVE[:4])


async def test_the_spec_s_own_max_tokens_caps_the_call_s(monkeypatch: pytest.MonkeyPatch) -> None:
    body = await sent_body(KITS["openai"], monkeypatch, settings(), max_tokens=20)
    assert body["max_tokens"] == 20
    body = await sent_body(KITS["openai"], monkeypatch, settings(max_tokens=10), max_tokens=20)
    assert body["max_tokens"] == 10


async def test_the_call_s_temperature_wins_over_the_spec_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = await sent_body(KITS["openai"], monkeypatch, settings(), temperature=1.0)
    assert body["temperature"] == 0.3
    body = await sent_body(KITS["openai"], monkeypatch, None, temperature=1.0)
    assert body["temperature"] == 1.0


async def test_without_settings_the_body_has_none_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = await sent_body(KITS["openai"], monkeypatch, None)
    assert not {"max_tokens", "max_completion_tokens", "temperature", "stop"} & set(body)


async def test_a_reasoning_openai_model_gets_no_call_temperature_or_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reasoning = ReasoningSettings(effort="low")
    body = await sent_body(KITS["openai"], monkeypatch, settings(), reasoning=reasoning)
    assert body["max_tokens"] == 50
    assert body["reasoning_effort"] == "low"
    assert "temperature" not in body
    assert "stop" not in body


async def test_the_responses_api_takes_max_tokens_and_temperature_but_no_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = await sent_body(KITS["openai-responses"], monkeypatch, settings())
    assert (body["max_output_tokens"], body["temperature"]) == (50, 0.3)
    assert not {"stop", "stop_sequences"} & set(body)


async def test_anthropic_takes_max_tokens_temperature_and_stop_sequences(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = await sent_body(KITS["anthropic"], monkeypatch, settings(stop=FIVE))
    assert (body["max_tokens"], body["temperature"]) == (50, 0.3)
    assert body["stop_sequences"] == list(FIVE)


async def test_anthropic_with_thinking_keeps_its_room_and_drops_the_temperature(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Budgeted thinking needs max_tokens above its budget; the API refuses a temperature
    # other than 1 beside thinking.
    reasoning = ReasoningSettings(budget_tokens=2048)
    body = await sent_body(KITS["anthropic"], monkeypatch, settings(), reasoning=reasoning)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 50 + 2048
    assert "temperature" not in body
    assert body["stop_sequences"] == ["END"]


async def test_gemini_takes_its_first_five_stop_sequences(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = await sent_body(KITS["gemini"], monkeypatch, settings(stop=FIVE))
    config = generation(body)
    assert (config["maxOutputTokens"], config["temperature"]) == (50, 0.3)
    assert config["stopSequences"] == list(FIVE[:5])
