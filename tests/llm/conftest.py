"""Fixtures of the adapter tests: a loopback server, and a guard against the internet.

The guard is autouse: any connection or name lookup that is not loopback is refused
and fails the test, even when the code under test swallows the error.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from kit.loopback import LoopbackServer, NetworkGuard, is_loopback

_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    guard = NetworkGuard()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        guard.check(self.family, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        guard.check(self.family, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not is_loopback(host):
            guard.blocked.append(f"lookup of {host!r}")
            raise socket.gaierror(f"test network guard: lookup of {host!r} refused")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    yield guard
    assert not guard.blocked, f"a test tried to leave loopback: {guard.blocked}"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
