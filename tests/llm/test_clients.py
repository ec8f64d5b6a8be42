"""Each SDK caller keeps one client, and so one connection, per event loop: reused by
every call and run on that loop, closed by ``aclose`` or when the loop shuts down."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from cleveragents.llm._base import SdkCaller
from cleveragents.tool import Message
from kit.loopback import WAIT_S, LoopbackServer, make_request

from .kits import Kit, kits

HISTORY = [Message("user", "hi")]


@pytest.fixture(params=kits(), ids=lambda kit: kit.name)
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Kit:
    chosen: Kit = request.param
    chosen.set_key(monkeypatch, "key-0123456789")
    return chosen


@pytest.fixture
def keep_alive() -> Iterator[LoopbackServer]:
    with LoopbackServer(keep_alive=True) as server:
        yield server


def build(provider: Kit, server: LoopbackServer) -> SdkCaller:
    return provider.caller(server, max_retries=0)


async def test_two_calls_share_one_connection_and_aclose_closes_it(
    provider: Kit, keep_alive: LoopbackServer
) -> None:
    keep_alive.queue(
        provider.text_stream("one"), provider.text_stream("two"), provider.text_stream("three")
    )
    call = build(provider, keep_alive)
    assert (await call(make_request(HISTORY))).content == "one"
    assert (await call(make_request(HISTORY, iteration=2))).content == "two"
    assert keep_alive.connections == 1
    await call.aclose()
    assert await asyncio.to_thread(keep_alive.closed.acquire, timeout=WAIT_S)
    # a call after aclose opens a new client, and so a new connection
    assert (await call(make_request(HISTORY))).content == "three"
    assert keep_alive.connections == 2
    await call.aclose()


async def test_a_changed_key_opens_a_new_client(
    provider: Kit, keep_alive: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    keep_alive.queue(provider.text_stream("one"), provider.text_stream("two"))
    call = build(provider, keep_alive)
    await call(make_request(HISTORY))
    monkeypatch.setenv(provider.key_env, "key-rotated-987654")
    await call(make_request(HISTORY))
    assert keep_alive.connections == 2
    assert await asyncio.to_thread(keep_alive.closed.acquire, timeout=WAIT_S)  # the old one
    await call.aclose()


def test_sync_runs_on_loops_of_their_own_close_their_client_with_the_loop(
    provider: Kit, keep_alive: LoopbackServer
) -> None:
    keep_alive.queue(provider.text_stream("one"), provider.text_stream("two"))
    call = build(provider, keep_alive)
    for text in ("one", "two"):
        assert asyncio.run(call(make_request(HISTORY))).content == text
        assert keep_alive.closed.acquire(timeout=WAIT_S)
    assert keep_alive.connections == 2
