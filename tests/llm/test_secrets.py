"""Keys and ``baseUrl`` credentials never leave an adapter, through the real SDKs and a
loopback provider that echoes them back: in its error bodies (whole, masked, cut short),
in a mid-stream error event, and in its response headers.

Every leak check looks for any 6-character run of the secret, case-insensitively, in
the error's text, its repr and traceback, and everything logged at DEBUG.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from cleveragents.llm import _redact
from cleveragents.llm._base import SdkCaller
from cleveragents.llm.anthropic import AnthropicCaller
from cleveragents.llm.errors import ModelProviderError
from cleveragents.llm.gemini import GeminiCaller
from cleveragents.llm.openai import OpenAIChatCaller
from cleveragents.llm.spec import ModelSpec
from cleveragents.tool import Message

from . import test_anthropic, test_gemini, test_openai
from .loopback import LoopbackServer, Recorded, Reply, data, event, json_reply, make_request

KEY = "pat-ca7Q2mZr9LwX4vN8bT1kHd6xyz"
PASSWORD = "hunter2-basic-pw"
TOKEN = "QUERYTOKEN-77aa"
HISTORY = [Message("user", "hi")]


@attrs.frozen
class Provider:
    name: str
    key_env: str
    build: Callable[[ModelSpec], SdkCaller]
    base_path: str
    error_body: Callable[[str], dict[str, Any]]
    error_event: Callable[[str], str] | None
    """``None`` where the provider has no error event inside a stream."""
    ok: Callable[[], Reply]
    sent_key: Callable[[Recorded], str]


OPENAI = Provider(
    "openai",
    "OPENAI_API_KEY",
    OpenAIChatCaller,
    "/v1",
    lambda text: {"error": {"message": text, "type": "invalid_request_error", "code": None}},
    lambda text: data({"error": {"message": text, "type": "invalid_request_error"}}),
    test_openai.text_stream,
    lambda sent: sent.headers["authorization"].removeprefix("Bearer "),
)
ANTHROPIC = Provider(
    "anthropic",
    "ANTHROPIC_API_KEY",
    AnthropicCaller,
    "",
    lambda text: {"type": "error", "error": {"type": "invalid_request_error", "message": text}},
    lambda text: event(
        {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    ),
    test_anthropic.text_stream,
    lambda sent: (
        sent.headers.get("x-api-key") or sent.headers["authorization"].removeprefix("Bearer ")
    ),
)
GEMINI = Provider(
    "gemini",
    "GEMINI_API_KEY",
    GeminiCaller,
    "",
    lambda text: {"error": {"code": 400, "message": text, "status": "INVALID_ARGUMENT"}},
    None,
    test_gemini.text_stream,
    lambda sent: sent.headers["x-goog-api-key"],
)


@pytest.fixture(autouse=True)
def unguarded_logs() -> None:
    """Take the log filter off, so that each test shows the adapter puts it on itself."""
    for logger in [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)]:
        logger.removeFilter(_redact._FILTER)


@pytest.fixture(params=[OPENAI, ANTHROPIC, GEMINI], ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Provider:
    chosen: Provider = request.param
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv(chosen.key_env, KEY)
    return chosen


def caller(provider: Provider, server: LoopbackServer, base_url: str | None = None) -> SdkCaller:
    spec = ModelSpec(
        provider.name,  # type: ignore[arg-type]
        model="m-test",
        base_url=base_url or server.base_url + provider.base_path,
        max_retries=0,
    )
    return provider.build(spec)


def leaks(text: str, secret: str = KEY) -> list[str]:
    """The 6-character runs of ``secret`` found in ``text``, case-insensitively."""
    low, sec = text.lower(), secret.lower()
    return [sec[i : i + 6] for i in range(len(sec) - 5) if sec[i : i + 6] in low]


async def failure_of(call: SdkCaller) -> ModelProviderError:
    with pytest.raises(ModelProviderError) as info:
        await call(make_request(HISTORY))
    return info.value


def everything_shown(exc: ModelProviderError, caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        (exc.message, str(exc), repr(exc), "".join(traceback.format_exception(exc)), caplog.text)
    )


ECHOES = {
    "whole": KEY,
    "masked": f"{KEY[:6]}...{KEY[-4:]}",
    "masked-ellipsis": f"{KEY[:6]}…{KEY[-4:]}",
    "prefix-14": KEY[:14],
    "suffix-10": KEY[-10:],
}


@pytest.mark.parametrize("echo", ECHOES.values(), ids=ECHOES.keys())
async def test_a_key_echoed_in_an_error_body_leaves_no_fragment_in_the_error_or_the_logs(
    provider: Provider, server: LoopbackServer, caplog: pytest.LogCaptureFixture, echo: str
) -> None:
    caplog.set_level(logging.DEBUG)
    server.queue(json_reply(provider.error_body(f"Key {echo} may not use this tool."), 400))
    exc = await failure_of(caller(provider, server))
    assert exc.code == ModelProviderError.code
    assert "may not use this tool" in exc.message  # the provider's reason still shows
    assert leaks(everything_shown(exc, caplog)) == []


@pytest.mark.parametrize("provider", [OPENAI, ANTHROPIC], ids=lambda p: p.name, indirect=True)
@pytest.mark.parametrize("echo", ECHOES.values(), ids=ECHOES.keys())
async def test_a_key_echoed_in_an_error_event_mid_stream_is_cut_too(
    provider: Provider, server: LoopbackServer, caplog: pytest.LogCaptureFixture, echo: str
) -> None:
    caplog.set_level(logging.DEBUG)
    assert provider.error_event is not None
    server.queue(Reply(headers={"Content-Type": "text/event-stream"},
                       chunks=[provider.error_event(f"Key {echo} was revoked").encode()]))  # fmt: skip
    exc = await failure_of(caller(provider, server))
    assert "mid-stream" in exc.message
    assert "was revoked" in exc.message
    assert leaks(everything_shown(exc, caplog)) == []


async def test_a_key_echoed_in_response_headers_never_reaches_the_logs(
    provider: Provider, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"x-request-id": KEY, "request-id": KEY, "x-echo-masked": ECHOES["masked"],
               "x-echo-prefix": ECHOES["prefix-14"]}  # fmt: skip
    server.queue(json_reply(provider.error_body("Not allowed."), 400, **headers))
    exc = await failure_of(caller(provider, server))
    assert "x-echo-masked" in caplog.text  # the HTTP library did log the headers
    assert leaks(everything_shown(exc, caplog)) == []


async def test_a_key_with_a_trailing_line_end_is_sent_stripped(
    provider: Provider,
    server: LoopbackServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(provider.key_env, KEY + "\r\n")
    server.queue(provider.ok())
    await caller(provider, server)(make_request(HISTORY))
    [sent] = server.requests
    assert provider.sent_key(sent) == KEY
    assert leaks(caplog.text) == []


async def test_a_base_urls_credentials_and_query_never_reach_the_logs_or_the_error(
    provider: Provider, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host = server.base_url.removeprefix("http://")
    base_url = f"http://user:{PASSWORD}@{host}{provider.base_path}/?token={TOKEN}"
    server.queue(json_reply(provider.error_body(f"No route for {base_url}"), 400))
    exc = await failure_of(caller(provider, server, base_url))
    assert "HTTP Request: POST http://" in caplog.text  # the request line was logged
    shown = everything_shown(exc, caplog)
    for secret in (PASSWORD, TOKEN, KEY):
        assert leaks(shown, secret) == [], secret
