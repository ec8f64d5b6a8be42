"""Without the MCP SDK installed, configuring a server is a clear error naming the extra,
wherever it is configured; the daemon itself works without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents.daemon import create_server
from cleveragents.rpc import _mcp_entries as _mcp
from cleveragents.rpc._dispatch import Dispatcher
from kit.inprocess import Sink, in_process_daemon
from kit.rawpeer import body

ENTRY = {"name": "git", "command": "mcp-server-git"}


@pytest.fixture(autouse=True)
def no_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mcp, "mcp_available", lambda: False)


async def test_mcp_add_and_run_start_name_the_extra(tmp_path: Path) -> None:
    dispatcher, sink = await in_process_daemon(tmp_path)
    dispatcher.receive(body({"jsonrpc": "2.0", "id": 1, "method": "mcp/add",
                             "params": {"servers": [ENTRY]}}))  # fmt: skip
    dispatcher.receive(body({"jsonrpc": "2.0", "id": 2, "method": "run/start", "params": {
        "prompt": "go", "mcpServers": [ENTRY],
        "model": {"provider": "scripted", "script": [{"content": "hi"}]}}}))  # fmt: skip
    await dispatcher.settle(timeout=10)
    for msg_id in (1, 2):
        (reply,) = sink.replies(msg_id)
        assert reply["error"]["code"] == -32025
        assert "cleveragents[mcp]" in reply["error"]["message"]
    assert not (tmp_path / "state" / "runs").exists() or not any(
        (tmp_path / "state" / "runs").glob("*.jsonl")
    )  # the refused run left nothing behind


async def test_initialize_with_mcp_servers_names_the_extra(tmp_path: Path) -> None:
    sink = Sink()
    dispatcher = Dispatcher(create_server(tmp_path / "state"), sink)
    dispatcher.receive(body({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "capabilities": {}, "rootUri": tmp_path.as_uri(),
        "initializationOptions": {"mcpServers": [ENTRY]}}}))  # fmt: skip
    (reply,) = sink.replies(1)
    assert reply["error"]["code"] == -32025
    assert "cleveragents[mcp]" in reply["error"]["message"]
