"""Each SDK caller keeps one client, and so one connection, per event loop: reused by
every call and run on that loop, closed by ``aclose`` or when the loop shuts down."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import attrs
import pytest

from cleveragents.llm._base import SdkCaller
from cleveragents.llm.anthropic import AnthropicCaller
from cleveragents.llm.gemini import GeminiCaller
from cleveragents.llm.openai import OpenAIChatCaller
from cleveragents.llm.spec import ModelSpec
from cleveragents.tool import Message

from . import test_anthropic, test_gemini, test_openai
from .loopback import WAIT_S, LoopbackServer, Reply, make_request

HISTORY = [Message("user", "hi")]


@attrs.frozen
class Provider:
    name: str
    key_env: str
    build: Callable[[ModelSpec], SdkCaller]
    base_path: str
    ok: Callable[[str], Reply]


PROVIDERS = [
    Provider("openai", "OPENAI_API_KEY", OpenAIChatCaller, "/v1", test_openai.text_stream),
    Provider("anthropic", "ANTHROPIC_API_KEY", AnthropicCaller, "", test_anthropic.text_stream),
    Provider("gemini", "GEMINI_API_KEY", GeminiCaller, "", test_gemini.text_stream),
]


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Provider:
    chosen: Provider = request.param
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv(chosen.key_env, "key-0123456789")
    return chosen


@pytest.fixture
def keep_alive() -> Iterator[LoopbackServer]:
    with LoopbackServer(keep_alive=True) as server:
        yield server


def build(provider: Provider, server: LoopbackServer) -> SdkCaller:
    model = "gemini-test" if provider.name == "gemini" else "m-test"
    spec = ModelSpec(
        provider.name,  # type: ignore[arg-type]
        model=model,
        base_url=server.base_url + provider.base_path,
        max_retries=0,
    )
    return provider.build(spec)


async def test_two_calls_share_one_connection_and_aclose_closes_it(
    provider: Provider, keep_alive: LoopbackServer
) -> None:
    keep_alive.queue(provider.ok("one"), provider.ok("two"))
    call = build(provider, keep_alive)
    assert (await call(make_request(HISTORY))).content == "one"
    assert (await call(make_request(HISTORY, iteration=2))).content == "two"
    assert keep_alive.connections == 1
    await call.aclose()
    assert await asyncio.to_thread(keep_alive.closed.acquire, timeout=WAIT_S)


async def test_a_changed_key_opens_a_new_client(
    provider: Provider, keep_alive: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    keep_alive.queue(provider.ok("one"), provider.ok("two"))
    call = build(provider, keep_alive)
    await call(make_request(HISTORY))
    monkeypatch.setenv(provider.key_env, "key-rotated-987654")
    await call(make_request(HISTORY))
    assert keep_alive.connections == 2
    assert await asyncio.to_thread(keep_alive.closed.acquire, timeout=WAIT_S)  # the old one
    await call.aclose()


def test_sync_runs_on_loops_of_their_own_close_their_client_with_the_loop(
    provider: Provider, keep_alive: LoopbackServer
) -> None:
    keep_alive.queue(provider.ok("one"), provider.ok("two"))
    call = build(provider, keep_alive)
    for text in ("one", "two"):
        assert asyncio.run(call(make_request(HISTORY))).content == text
        assert keep_alive.closed.acquire(timeout=WAIT_S)
    assert keep_alive.connections == 2
