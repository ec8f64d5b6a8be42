"""Keys and ``baseUrl`` credentials never leave an adapter, through the real SDKs and a
loopback provider that echoes them back: in its error bodies (whole, masked, cut short),
in a mid-stream error event, and in its response headers.

Every leak check looks for any 6-character run of the secret, case-insensitively, in
the error's text, its repr and traceback, and everything logged at DEBUG.
"""

from __future__ import annotations

import logging
import traceback

import pytest

from cleveragents.llm import _redact
from cleveragents.llm._base import SdkCaller
from cleveragents.llm.errors import ModelProviderError
from cleveragents.tool import Message
from kit.loopback import LoopbackServer, Reply, json_reply, make_request

from .kits import Kit, kits

KEY = "pat-ca7Q2mZr9LwX4vN8bT1kHd6xyz"
PASSWORD = "hunter2-basic-pw"
TOKEN = "QUERYTOKEN-77aa"
HISTORY = [Message("user", "hi")]


@pytest.fixture(autouse=True)
def unguarded_logs() -> None:
    """Take the log filter off, so that each test shows the adapter puts it on itself."""
    for logger in [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)]:
        logger.removeFilter(_redact._FILTER)


@pytest.fixture(params=kits(), ids=lambda kit: kit.name)
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Kit:
    chosen: Kit = request.param
    chosen.set_key(monkeypatch, KEY)
    return chosen


def caller(provider: Kit, server: LoopbackServer, base_url: str | None = None) -> SdkCaller:
    return provider.caller(server, base_url=base_url, max_retries=0)


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
    provider: Kit, server: LoopbackServer, caplog: pytest.LogCaptureFixture, echo: str
) -> None:
    caplog.set_level(logging.DEBUG)
    server.queue(json_reply(provider.error_body(f"Key {echo} may not use this tool."), 400))
    exc = await failure_of(caller(provider, server))
    assert exc.code == ModelProviderError.code
    assert "may not use this tool" in exc.message  # the provider's reason still shows
    assert leaks(everything_shown(exc, caplog)) == []


@pytest.mark.parametrize(
    "provider", [k for k in kits() if k.error_event], ids=lambda k: k.name, indirect=True
)
@pytest.mark.parametrize("echo", ECHOES.values(), ids=ECHOES.keys())
async def test_a_key_echoed_in_an_error_event_mid_stream_is_cut_too(
    provider: Kit, server: LoopbackServer, caplog: pytest.LogCaptureFixture, echo: str
) -> None:
    caplog.set_level(logging.DEBUG)
    assert provider.error_event is not None
    revoked = provider.error_event("invalid_request_error", f"Key {echo} was revoked")
    server.queue(Reply(headers={"Content-Type": "text/event-stream"},
                       chunks=[revoked.encode()]))  # fmt: skip
    exc = await failure_of(caller(provider, server))
    assert "mid-stream" in exc.message
    assert "was revoked" in exc.message
    assert leaks(everything_shown(exc, caplog)) == []


async def test_a_key_echoed_in_response_headers_never_reaches_the_logs(
    provider: Kit, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"x-request-id": KEY, "request-id": KEY, "x-echo-masked": ECHOES["masked"],
               "x-echo-prefix": ECHOES["prefix-14"]}  # fmt: skip
    server.queue(json_reply(provider.error_body("Not allowed."), 400, **headers))
    exc = await failure_of(caller(provider, server))
    assert "x-echo-masked" in caplog.text  # the HTTP library did log the headers
    assert leaks(everything_shown(exc, caplog)) == []


async def test_a_key_with_a_trailing_line_end_is_sent_stripped(
    provider: Kit,
    server: LoopbackServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(provider.key_env, KEY + "\r\n")
    server.queue(provider.text_stream("ok"))
    await caller(provider, server)(make_request(HISTORY))
    [sent] = server.requests
    assert provider.sent_key(sent) == KEY
    assert leaks(caplog.text) == []


async def test_a_base_urls_credentials_and_query_never_reach_the_logs_or_the_error(
    provider: Kit, server: LoopbackServer, caplog: pytest.LogCaptureFixture
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
