"""The autouse guard of tests/llm: nothing here may leave loopback."""

from __future__ import annotations

import socket

import pytest

from cleveragents.llm.builtin.openai import OpenAIChatCaller
from cleveragents.llm.errors import ModelProviderError
from cleveragents.llm.spec import ModelSpec
from cleveragents.tool import Message
from kit.loopback import NetworkGuard, make_request


def test_a_connection_outside_loopback_is_refused(network_guard: NetworkGuard) -> None:
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(("203.0.113.7", 443))  # TEST-NET-3: never routed
    assert network_guard.blocked == ["('203.0.113.7', 443)"]
    network_guard.blocked.clear()


async def test_an_adapter_pointed_at_a_real_provider_cannot_reach_it(
    network_guard: NetworkGuard, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
    caller = OpenAIChatCaller(ModelSpec("openai", model="gpt-x", max_retries=0))
    with pytest.raises(ModelProviderError):
        await caller(make_request([Message("user", "hi")]))
    assert network_guard.blocked
    network_guard.blocked.clear()


def test_loopback_connections_are_allowed() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname(), timeout=5):
            pass
