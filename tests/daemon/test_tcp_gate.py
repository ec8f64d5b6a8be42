"""The TCP gate in process: what a connection may do before it presents the token (one
small frame, in time, an ``initialize`` with the token) and how guessing is slowed (a
growing wait per peer, a bound on connections waiting to authenticate)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import pytest

from cleveragents.daemon._tcp_gate import GateLimits, PeerThrottle, TcpGate, peer_key
from cleveragents.protocol import encode_frame, frame
from kit.tcp import TOKEN, close, closed_unanswered
from kit.wait import wait_for

ADMITTED = b"admitted\n"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@attrs.define
class Gate:
    """A loopback listener whose connections go through a ``TcpGate``; an admitted one
    is answered ``ADMITTED`` and closed, so the test sees which way each went."""

    gate: TcpGate
    port: int
    clock: FakeClock
    admitted: list[bytes] = attrs.field(factory=list)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with asyncio.timeout(10):
            return await asyncio.open_connection("127.0.0.1", self.port)

    async def send(self, data: bytes) -> bytes:
        """Send ``data`` on a new connection; what came back before the close."""
        reader, writer = await self.connect()
        writer.write(data)
        try:
            return await closed_unanswered(reader)
        finally:
            await close(writer)


GateFactory = Callable[..., Any]


@pytest.fixture
async def make_gate() -> AsyncIterator[GateFactory]:
    servers: list[asyncio.Server] = []

    async def start(**limits: Any) -> Gate:
        clock = FakeClock()
        gate = TcpGate(TOKEN, GateLimits(**limits), clock)
        holder: list[Gate] = []

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            body = await gate.admit(reader, writer)
            if body is not None:
                holder[0].admitted.append(body)
                writer.write(ADMITTED)
                await writer.drain()
                writer.close()

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        servers.append(server)
        holder.append(Gate(gate, server.sockets[0].getsockname()[1], clock))
        return holder[0]

    yield start
    for server in servers:
        server.close()


def initialize(token: str | None = TOKEN, pad: int = 0) -> dict[str, Any]:
    options: dict[str, Any] = {} if token is None else {"token": token}
    message: dict[str, Any] = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": None, "capabilities": {}, "initializationOptions": options},
    }  # fmt: skip
    if pad:
        message["params"]["padding"] = "x" * pad
    return message


async def test_the_token_in_an_initialize_is_admitted_and_handed_on_whole(make_gate: Any) -> None:
    gate = await make_gate()
    assert await gate.send(frame(initialize())) == ADMITTED
    assert [json.loads(body)["method"] for body in gate.admitted] == ["initialize"]


async def test_a_first_frame_over_64_kib_closes_the_connection_unread(make_gate: Any) -> None:
    gate = await make_gate()
    # The header alone is enough: the body is never waited for.
    assert await gate.send(b"Content-Length: 65537\r\n\r\n") == b""
    assert await gate.send(b"Content-Length: 67108864\r\n\r\n{") == b""
    # 64 KiB exactly still goes through.
    body = json.dumps(initialize())
    padded = json.dumps(initialize(pad=65536 - len(body) - len(', "padding": ""')))
    assert len(padded.encode()) == 65536
    assert await gate.send(encode_frame(padded)) == ADMITTED
    assert gate.gate.throttle.failures("127.0.0.1") == 0  # framing is not a token guess


async def test_an_oversized_or_endless_header_closes_the_connection(make_gate: Any) -> None:
    gate = await make_gate()
    assert await gate.send(b"X-Padding: " + b"a" * 2000 + b"\r\n") == b""
    assert await gate.send(b"a" * 70000) == b""  # a line with no end
    assert await gate.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == b""  # no Content-Length
    assert await gate.send(b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n") == b""
    assert gate.admitted == []


async def test_no_whole_first_frame_in_time_closes_the_connection(make_gate: Any) -> None:
    gate = await make_gate(timeout_s=0.2)
    reader, writer = await gate.connect()
    writer.write(b"Content-Length: 40\r\n\r\n{")  # and then nothing
    assert await closed_unanswered(reader) == b""
    await close(writer)
    assert gate.gate.unauthenticated == 0


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "result": None},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "exit"},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 7, "method": "shutdown"},
        [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}],
        {"jsonrpc": "2.0", "id": True, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": []},
        {"jsonrpc": "1.0", "id": 1, "method": "initialize", "params": {}},
        "initialize",
    ],
    ids=[
        "result", "error", "notification", "exit", "request", "shutdown", "batch",
        "boolean-id", "list-params", "old-jsonrpc", "string",
    ],
)  # fmt: skip
async def test_anything_but_an_initialize_first_closes_the_connection_unanswered(
    make_gate: Any, message: Any
) -> None:
    gate = await make_gate()
    assert await gate.send(encode_frame(json.dumps(message))) == b""
    assert gate.admitted == []
    assert gate.gate.throttle.failures("127.0.0.1") == 0


async def test_a_first_frame_that_is_not_json_closes_the_connection_unanswered(
    make_gate: Any,
) -> None:
    gate = await make_gate()
    assert await gate.send(encode_frame("{not json")) == b""
    assert await gate.send(encode_frame("[" * 60000 + "]" * 60000)) == b""  # deep, < 64 KiB
    assert await gate.send(b"Content-Length: 2\r\n\r\n\xff\xfe") == b""
    assert gate.admitted == []


async def test_the_frame_after_the_initialize_is_left_for_the_dispatcher(make_gate: Any) -> None:
    gate = await make_gate()
    reader, writer = await gate.connect()
    second = frame({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    writer.write(frame(initialize()) + second)
    assert await closed_unanswered(reader) == ADMITTED
    await close(writer)
    assert len(gate.admitted) == 1
    assert json.loads(gate.admitted[0])["id"] == 1


async def test_a_wrong_token_is_closed_unanswered_and_the_peer_waits_longer_each_time(
    make_gate: Any,
) -> None:
    gate = await make_gate(first_delay_s=1.0, max_delay_s=8.0)
    clock, throttle = gate.clock, gate.gate.throttle
    waits = []
    for attempt in range(6):
        token = None if attempt == 0 else f"wrong-{attempt}"
        assert await gate.send(frame(initialize(token))) == b""
        waits.append(throttle.wait_left("127.0.0.1"))
        # While the peer waits, even the right token is not compared: closed at accept.
        assert await gate.send(frame(initialize())) == b""
        assert throttle.failures("127.0.0.1") == attempt + 1
        clock.now += waits[-1]
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    # Once the wait is over, the right token gets in, and the count starts again.
    assert await gate.send(frame(initialize())) == ADMITTED
    assert throttle.failures("127.0.0.1") == 0


def test_a_peers_failures_are_forgotten_after_a_while_and_the_table_is_bounded() -> None:
    clock = FakeClock()
    throttle = PeerThrottle(GateLimits(forget_after_s=600.0, max_peers=3), clock)
    throttle.failed("10.0.0.1")
    throttle.failed("10.0.0.1")
    clock.now += 601
    assert throttle.failures("10.0.0.1") == 0
    for peer in ("10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"):
        throttle.failed(peer)
    assert [throttle.failures(p) for p in ("10.0.0.2", "10.0.0.5")] == [0, 1]


async def test_connections_waiting_to_authenticate_are_bounded_and_one_more_is_closed_at_once(
    make_gate: Any,
) -> None:
    gate = await make_gate(max_unauthenticated=3, timeout_s=30.0)
    waiting = [await gate.connect() for _ in range(3)]
    for _, writer in waiting:
        writer.write(b"Content-Length: 10\r\n")  # a header begun, never ended
    await wait_for(lambda: gate.gate.unauthenticated == 3)
    reader, writer = await gate.connect()
    writer.write(frame(initialize()))  # the right token, but no room
    assert await closed_unanswered(reader) == b""
    await close(writer)
    assert gate.gate.unauthenticated == 3
    assert all(not reader.at_eof() for reader, _ in waiting)
    for _, writer in waiting:
        await close(writer)
    await wait_for(lambda: gate.gate.unauthenticated == 0)
    assert await gate.send(frame(initialize())) == ADMITTED


def test_an_ipv6_peer_counts_by_its_64_and_a_mapped_ipv4_as_itself() -> None:
    assert peer_key(("2001:db8:1:2::5", 7000, 0, 0)) == peer_key(("2001:db8:1:2:ffff::9", 1))
    assert peer_key(("2001:db8:1:2::5", 7000, 0, 0)) != peer_key(("2001:db8:1:3::5", 1))
    assert peer_key(("::ffff:10.1.2.3", 7000, 0, 0)) == "10.1.2.3"
    assert peer_key(("fe80::1%eth0", 7000, 0, 2)) == "fe80::/64"


async def test_the_gates_log_names_the_peer_and_never_the_token(
    make_gate: Any, caplog: pytest.LogCaptureFixture
) -> None:
    gate = await make_gate()
    with caplog.at_level("DEBUG", logger="cleveragents.daemon"):
        assert await gate.send(frame(initialize(TOKEN[:-1]))) == b""
        gate.clock.now += 10
        assert await gate.send(frame(initialize())) == ADMITTED
    text = caplog.text
    assert "a wrong token (1 failed attempt from 127.0.0.1" in text
    assert TOKEN[:-1] not in text
