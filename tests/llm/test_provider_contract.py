"""The contract every SDK-backed provider keeps, checked for each one in the provider table
through its real SDK against a loopback server that speaks its API (``kits.py``).

Streaming, the key rules, errors mapped to short key-free messages, retries and their
waits, timeouts and cancellation behave the same whatever the provider; what differs
(request bodies, field names, provider-only errors) is tested in the provider's own file.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback

import pytest

from cleveragents.llm import get_provider
from cleveragents.llm.errors import ModelConfigError, ModelProviderError
from cleveragents.llm.spec import ModelSpec, create_caller
from cleveragents.tool import CancelToken, Message
from kit.loopback import WAIT_S, LoopbackServer, RecordingSleep, Reply, make_request, sse_reply

from .kits import KITS, Kit, kits, sdk_providers

KEY = "sk-q7Zr2mW9xLpV4nB8tY1kHd6Jf0Xc"
HISTORY = [Message("system", "Be brief."), Message("user", "Read a.txt")]


@pytest.fixture(params=kits(), ids=lambda kit: kit.name)
def kit(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Kit:
    chosen: Kit = request.param
    chosen.set_key(monkeypatch, KEY)
    return chosen


def leaks(text: str, secret: str = KEY) -> list[str]:
    """The 6-character runs of ``secret`` found in ``text``, case-insensitively."""
    low, sec = text.lower(), secret.lower()
    return [sec[i : i + 6] for i in range(len(sec) - 5) if sec[i : i + 6] in low]


async def failure(kit: Kit, server: LoopbackServer, **kw: object) -> ModelProviderError:
    with pytest.raises(ModelProviderError) as info:
        await kit.caller(server, **kw)(make_request(HISTORY))
    assert info.value.code == ModelProviderError.code
    return info.value


def test_every_sdk_provider_in_the_table_has_a_kit() -> None:
    assert [name for name in sdk_providers() if name not in KITS] == []
    assert {"openai", "anthropic", "gemini"} <= set(sdk_providers())


# -- streaming and keys --------------------------------------------------------------------


async def test_streamed_text_reaches_on_delta_and_the_content(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(kit.text_stream("Hello."))
    deltas: list[str] = []
    response = await kit.caller(server)(make_request(HISTORY, deltas=deltas))
    assert deltas == ["Hello."]
    assert response.content == "Hello."
    assert response.tool_calls == []
    assert response.stop_reason is not None
    assert kit.sent_key(server.requests[0]) == KEY


def test_no_key_and_no_base_url_is_a_config_error_naming_the_key_variables(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = get_provider(kit.name).key_envs
    for name in names:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelConfigError) as info:
        create_caller(ModelSpec(kit.name, model=kit.model))
    assert info.value.code == ModelConfigError.code
    assert " or ".join(names) in info.value.message


def test_a_spec_without_a_model_is_a_config_error_showing_one(kit: Kit) -> None:
    with pytest.raises(ModelConfigError) as info:
        create_caller(ModelSpec(kit.name))
    assert get_provider(kit.name).example_spec in info.value.message


async def test_a_keyless_local_server_gets_a_placeholder_key(
    kit: Kit, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in get_provider(kit.name).key_envs:
        monkeypatch.delenv(name, raising=False)
    server.queue(kit.text_stream("hi"))
    response = await kit.caller(server)(make_request(HISTORY))
    assert response.content == "hi"
    assert kit.sent_key(server.requests[0]) == "no-key"


async def test_the_key_comes_from_api_key_env_when_set(
    kit: Kit, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "gw-key-1")
    server.queue(kit.text_stream("hi"))
    await kit.caller(server, api_key_env="MY_GATEWAY_KEY")(make_request(HISTORY))
    assert kit.sent_key(server.requests[0]) == "gw-key-1"


async def test_a_successful_call_after_a_retry_logs_nothing_of_the_key(
    kit: Kit, server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.queue(kit.transient(kit.transient_status), kit.text_stream("fine"))
    response = await kit.caller(server)(make_request(HISTORY))
    assert response.content == "fine"
    assert "retry 1 of 3" in caplog.text
    assert leaks(caplog.text) == []


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_bad_credentials_fail_at_once_without_leaking_the_key(
    kit: Kit, server: LoopbackServer, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    caplog.set_level(logging.DEBUG)
    server.queue(kit.auth_error(status, KEY), kit.text_stream("unused"))
    exc = await failure(kit, server)
    assert f"authentication failed (HTTP {status}): check {kit.key_env}" in exc.message
    assert len(server.requests) == 1
    shown = (str(exc), repr(exc), "".join(traceback.format_exception(exc)), caplog.text)
    assert leaks("\n".join(shown)) == []
    assert "sk-" not in str(exc)


async def test_an_unknown_model_is_reported_as_not_found(kit: Kit, server: LoopbackServer) -> None:
    server.queue(kit.not_found())
    exc = await failure(kit, server)
    assert f"model {kit.model!r} or its endpoint was not found (HTTP 404)" in exc.message
    assert len(server.requests) == 1


async def test_context_overflow_is_reported_as_such(kit: Kit, server: LoopbackServer) -> None:
    server.queue(kit.overflow())
    exc = await failure(kit, server)
    assert "longer than the model's context window (HTTP 400)" in exc.message
    assert len(server.requests) == 1


async def test_other_rejections_carry_the_providers_short_reason(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(Reply(status=400, json_body=kit.error_body("Invalid schema for function 'x'")))
    exc = await failure(kit, server)
    assert "request rejected (HTTP 400): Invalid schema for function 'x'" in exc.message
    assert len(server.requests) == 1


# -- retries -------------------------------------------------------------------------------


async def test_a_rate_limit_waits_as_the_provider_asks_then_succeeds(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(kit.rate_limited(7), kit.text_stream("done"))
    sleep = RecordingSleep()
    response = await kit.caller(server, sleep=sleep)(make_request(HISTORY))
    assert response.content == "done"
    assert sleep.delays == [7.0]
    assert len(server.requests) == 2


async def test_a_rate_limit_asking_for_an_hour_fails_at_once(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(kit.rate_limited(3600), kit.text_stream("unused"))
    exc = await failure(kit, server)
    assert "rate limited (HTTP 429)" in exc.message
    assert "longer than the 60s limit" in exc.message
    assert len(server.requests) == 1


async def test_server_errors_back_off_exponentially_then_succeed(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(kit.transient(500), kit.transient(502), kit.text_stream("ok"))
    sleep = RecordingSleep()
    call = kit.caller(server, base_delay_s=1.0, max_delay_s=8.0, sleep=sleep)
    response = await call(make_request(HISTORY))
    assert response.content == "ok"
    first, second = sleep.delays
    assert 0.75 <= first <= 1.0
    assert 1.5 <= second <= 2.0


async def test_repeated_server_errors_give_up_after_max_retries(
    kit: Kit, server: LoopbackServer
) -> None:
    status = kit.transient_status
    server.queue(*[kit.transient(status) for _ in range(3)], kit.text_stream("unused"))
    sleep = RecordingSleep()
    exc = await failure(kit, server, max_retries=2, sleep=sleep)
    assert f"provider error (HTTP {status}) (gave up after 3 attempts)" in exc.message
    assert len(server.requests) == 3
    assert len(sleep.delays) == 2


# -- streams that end badly ----------------------------------------------------------------


async def test_a_stream_that_ends_before_the_model_finished_is_an_error(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(kit.unfinished("Half"))
    exc = await failure(kit, server, max_retries=0)
    assert "the stream ended before the model finished" in exc.message


async def test_a_stream_that_ends_early_before_any_text_is_retried(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(kit.unfinished(""), kit.text_stream("whole"))
    response = await kit.caller(server)(make_request(HISTORY))
    assert response.content == "whole"
    assert len(server.requests) == 2


async def test_a_connection_cut_after_text_is_not_retried(kit: Kit, server: LoopbackServer) -> None:
    server.queue(kit.text_then_cut("Partial"), kit.text_stream("should not be used"))
    deltas: list[str] = []
    with pytest.raises(ModelProviderError) as info:
        await kit.caller(server)(make_request(HISTORY, deltas=deltas))
    assert info.value.code == ModelProviderError.code
    assert deltas == ["Partial"]
    assert len(server.requests) == 1


def _with_error_events() -> list[Kit]:
    return [kit for kit in kits() if kit.error_event is not None]


@pytest.mark.parametrize("kit", _with_error_events(), ids=lambda k: k.name, indirect=True)
async def test_an_error_event_before_any_text_is_retried(kit: Kit, server: LoopbackServer) -> None:
    assert kit.error_event is not None
    assert kit.retryable_event_kind is not None
    broken = sse_reply(kit.error_event(kit.retryable_event_kind, "Overloaded"))
    server.queue(broken, kit.text_stream("second time"))
    response = await kit.caller(server)(make_request(HISTORY))
    assert response.content == "second time"
    assert len(server.requests) == 2


@pytest.mark.parametrize("kit", _with_error_events(), ids=lambda k: k.name, indirect=True)
async def test_an_error_event_after_text_is_final(kit: Kit, server: LoopbackServer) -> None:
    assert kit.error_event is not None
    assert kit.retryable_event_kind is not None
    text_first = kit.text_then_hang("Part").chunks  # the text, without the hang
    broken = sse_reply(*text_first, kit.error_event(kit.retryable_event_kind, "Overloaded"))
    server.queue(broken, kit.text_stream("unused"))
    deltas: list[str] = []
    with pytest.raises(ModelProviderError) as info:
        await kit.caller(server)(make_request(HISTORY, deltas=deltas))
    assert "the provider reported an error mid-stream: Overloaded" in info.value.message
    assert deltas == ["Part"]
    assert len(server.requests) == 1


# -- timeouts and cancellation -------------------------------------------------------------


async def test_a_hanging_server_times_out(kit: Kit, server: LoopbackServer) -> None:
    server.queue(Reply(hang=True))
    with pytest.raises(ModelProviderError) as info:
        async with asyncio.timeout(WAIT_S):
            await kit.caller(server, timeout_s=0.2, max_retries=0)(make_request(HISTORY))
    assert "no response within 0.2s" in info.value.message


async def test_a_timeout_is_retried_within_the_bound(kit: Kit, server: LoopbackServer) -> None:
    server.queue(Reply(hang=True), kit.text_stream("late but fine"))
    async with asyncio.timeout(WAIT_S):
        response = await kit.caller(server, timeout_s=0.2, max_retries=1)(make_request(HISTORY))
    assert response.content == "late but fine"


async def test_cancel_aborts_the_in_flight_stream_promptly(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(kit.text_then_hang("Thinking"))
    token = CancelToken()
    first_delta = asyncio.Event()
    request = make_request(HISTORY, cancel=token)
    request.on_delta = lambda _text: first_delta.set()
    task = asyncio.create_task(kit.caller(server)(request))
    async with asyncio.timeout(WAIT_S):
        await first_delta.wait()
    # the token fires from another thread, as a daemon's cancel would
    threading.Thread(target=token.cancel).start()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(WAIT_S):
            await task
    assert await asyncio.to_thread(server.client_left.wait, WAIT_S)


async def test_cancel_aborts_a_request_still_waiting_for_headers(
    kit: Kit, server: LoopbackServer
) -> None:
    server.queue(Reply(hang=True))
    token = CancelToken()
    task = asyncio.create_task(kit.caller(server)(make_request(HISTORY, cancel=token)))
    assert await asyncio.to_thread(server.request_seen.wait, WAIT_S)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(WAIT_S):
            await task
    assert await asyncio.to_thread(server.client_left.wait, WAIT_S)


async def test_an_already_cancelled_token_sends_nothing(kit: Kit, server: LoopbackServer) -> None:
    token = CancelToken()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await kit.caller(server)(make_request(HISTORY, cancel=token))
    assert server.requests == []


async def test_cancel_during_a_retry_wait_stops_at_once(kit: Kit, server: LoopbackServer) -> None:
    server.queue(kit.transient(kit.transient_status))
    waiting = asyncio.Event()

    async def long_sleep(delay: float) -> None:
        waiting.set()
        await asyncio.sleep(delay)

    token = CancelToken()
    slow = kit.caller(server, base_delay_s=30.0, max_delay_s=30.0, sleep=long_sleep)
    task = asyncio.create_task(slow(make_request(HISTORY, cancel=token)))
    async with asyncio.timeout(WAIT_S):
        await waiting.wait()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(WAIT_S):
            await task
    assert len(server.requests) == 1
