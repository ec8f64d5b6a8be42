"""A run that starts and then fails (its provider refuses the request) answers its
``session/prompt`` with a JSON-RPC error carrying the run's own error code and message,
and the session goes on."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cleveragents.llm.errors import ModelProviderError
from kit.acp import Spawn


class Refusing(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"error": {"message": "model 'm' does not exist",
                                     "type": "invalid_request_error"}}).encode()  # fmt: skip
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_a_failed_run_is_an_error_with_its_own_code(
    spawn: Spawn, workspace: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-failed-run")
    client = await spawn({"provider": "openai", "model": "m", "baseUrl": provider})
    session = (await client.new_session(workspace))["sessionId"]
    reply = await client.raw_request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
    )
    assert reply["error"]["code"] == ModelProviderError.code
    assert "HTTP 404" in reply["error"]["message"]  # the run's own message
    again = await client.raw_request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}
    )
    assert again["error"]["code"] == ModelProviderError.code  # the session is still there
