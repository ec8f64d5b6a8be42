"""A scripted HTTP server on 127.0.0.1 for testing the provider adapters through their SDKs.

Each test queues replies; each request takes the next one, in order. A stateful fake
gives ``respond`` instead, which decides each reply from the request (and may refuse
it, as the real API would). A reply is JSON, a
stream of Server-Sent Events (written in HTTP chunks exactly as given, so an event can
be split mid-JSON), or a hang that holds the connection until the client goes away or
the server stops. Every request is recorded with its headers and JSON body.

Threads, not asyncio: the code under test runs on the test's event loop, and the server
must answer even while that loop is blocked on a bug.

Also here: ``make_request``, ``RecordingSleep`` (records retry waits instead of
waiting), and ``NetworkGuard``, which conftest.py installs for every test.
"""

from __future__ import annotations

import ipaddress
import json
import select
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

from cleveragents.tool import CancelToken, LLMRequest, Message, ToolActorContext, ToolSchema

WAIT_S = 5.0
"""The bound on every wait in these tests."""


@attrs.define
class Reply:
    status: int = 200
    headers: dict[str, str] = attrs.field(factory=dict)
    json_body: Any = None
    chunks: Sequence[bytes] = ()
    hang: bool = False
    """After ``chunks`` (if any), hold the connection open until the client leaves."""
    cut: bool = False
    """After ``chunks``, close the connection without ending the body."""


def json_reply(body: Any, status: int = 200, **headers: str) -> Reply:
    return Reply(status=status, headers=dict(headers), json_body=body)


def sse_reply(*events: bytes | str, hang: bool = False, cut: bool = False) -> Reply:
    chunks = [e.encode() if isinstance(e, str) else e for e in events]
    return Reply(headers={"Content-Type": "text/event-stream"}, chunks=chunks, hang=hang, cut=cut)


def data(obj: Any) -> str:
    """An unnamed SSE event (OpenAI's style)."""
    return f"data: {json.dumps(obj)}\n\n"


def event(obj: dict[str, Any]) -> str:
    """A named SSE event (Anthropic's style): the event name is the object's type."""
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n"


@attrs.define
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class LoopbackServer:
    """Serves queued replies on ``base_url``; use as a context manager.

    Each reply closes its connection unless ``keep_alive``; ``connections`` counts the
    TCP connections accepted, so a test can see a client reuse one; ``closed`` is set
    each time a connection ends.
    """

    def __init__(
        self, *, keep_alive: bool = False, respond: Callable[[Recorded], Reply] | None = None
    ) -> None:
        self.keep_alive = keep_alive
        self.respond = respond
        self.connections = 0
        self.closed = threading.Semaphore(0)
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self.request_seen = threading.Event()
        self.client_left = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(WAIT_S)

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self.respond is not None:
                reply = self.respond(recorded)
            elif self.replies:
                reply = self.replies.pop(0)
            else:
                reply = json_reply({"error": "unscripted"}, 599)
        self.request_seen.set()
        return reply


def _handler_for(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            # Replies go out in several writes; with Nagle on, each waits for the
            # client's delayed ACK (40 ms on loopback), which tests would then measure.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with server._lock:
                server.connections += 1

        def finish(self) -> None:
            super().finish()
            server.closed.release()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = server._next(Recorded("POST", self.path, headers, body))
            try:
                self._send(reply)
            except OSError:  # the client left mid-reply: what cancel tests want
                server.client_left.set()
                self.close_connection = True
                return
            self.close_connection = not server.keep_alive or reply.cut or reply.hang

        def _send(self, reply: Reply) -> None:
            if reply.hang and not reply.chunks:
                self._hang()
                return
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if not server.keep_alive:
                self.send_header("Connection", "close")
            if reply.json_body is not None:
                payload = json.dumps(reply.json_body).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in reply.chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            if reply.hang:
                self._hang()
                return
            if not reply.cut:
                self.wfile.write(b"0\r\n\r\n")

        def _hang(self) -> None:
            """Hold the connection until the client closes it or the server stops."""
            self.wfile.flush()
            sock = self.connection
            while not server._stopping.is_set():
                readable, _, _ = select.select([sock], [], [], 0.02)
                if readable:
                    try:
                        gone = sock.recv(4096) == b""
                    except OSError:
                        gone = True
                    if gone:
                        server.client_left.set()
                        return

    return Handler


def make_request(
    messages: Sequence[Message],
    tools: Sequence[ToolSchema] = (),
    *,
    deltas: list[str] | None = None,
    cancel: CancelToken | None = None,
    iteration: int = 1,
) -> LLMRequest:
    """An ``LLMRequest`` whose streamed text lands in ``deltas``."""
    sink = deltas if deltas is not None else []
    return LLMRequest(
        messages=messages,
        tools=tools,
        iteration=iteration,
        context=ToolActorContext(),
        cancel=cancel or CancelToken(),
        on_delta=sink.append,
    )


class RecordingSleep:
    """Stands in for ``asyncio.sleep`` between retries: records the delay, waits not."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class NetworkGuard:
    """Refuses connections that are not loopback, and remembers each attempt."""

    def __init__(self) -> None:
        self.blocked: list[str] = []

    def check(self, family: object, address: object) -> None:
        if family == socket.AF_UNIX or not isinstance(address, tuple):
            return
        if not is_loopback(address[0]):
            self.blocked.append(repr(address))
            raise ConnectionRefusedError(f"test network guard: {address!r} is not loopback")
