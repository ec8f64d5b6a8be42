"""Names and paths a client sends: reserved tool-name prefixes in any case, and paths
holding NUL or control characters, are refused with a clear code, never an internal error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cleveragents.daemon import create_server
from cleveragents.rpc._dispatch import Dispatcher
from kit.inprocess import Sink, in_process_daemon
from kit.rawpeer import body


async def _ask(dispatcher: Dispatcher, sink: Sink, method: str, params: Any) -> dict[str, Any]:
    msg_id = f"q{len(sink.frames)}"
    dispatcher.receive(body({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
    await dispatcher.settle(timeout=5)
    (reply,) = sink.replies(msg_id)
    return reply


@pytest.mark.parametrize("name", ["Builtin/file-read", "BUILTIN/shell", "MCP:x", "Mcp:srv/tool"])
async def test_reserved_prefixes_are_refused_in_any_case(tmp_path: Path, name: str) -> None:
    dispatcher, sink = await in_process_daemon(tmp_path)
    tool = {"name": name, "description": "d", "inputSchema": {"type": "object"}}
    reply = await _ask(dispatcher, sink, "tools/register", {"tools": [tool]})
    assert reply["error"]["code"] == -32011  # ToolError: the name is reserved
    listed = await _ask(dispatcher, sink, "tools/list", {})
    assert name not in [t["name"] for t in listed["result"]["tools"]]


@pytest.mark.parametrize("root", ["ws\x00/etc", "ws\n", "ws\x1b[2J"])
async def test_a_sandbox_root_with_nul_or_control_characters_is_invalid_params(
    tmp_path: Path, root: str
) -> None:
    dispatcher, sink = await in_process_daemon(tmp_path)
    reply = await _ask(dispatcher, sink, "run/start", {
        "prompt": "go", "sandboxRoot": str(tmp_path / root),
        "model": {"provider": "scripted", "script": [{"content": "hi"}]}})  # fmt: skip
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith("params.sandboxRoot:")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"rootUri": "file:///tmp/a%00b"}, "rootUri:"),
        ({"rootPath": "/tmp/a\x00b"}, "rootPath:"),
        ({"workspaceFolders": [{"uri": "file:///tmp/ok", "name": "ok"},
                               {"uri": "file:///tmp/%01", "name": "bad"}]},
         "workspaceFolders[1].uri:"),
        ({"rootUri": "file:///tmp", "initializationOptions": {"stateDir": "/tmp/s\x00"}},
         "initializationOptions.stateDir:"),
    ],
)  # fmt: skip
async def test_initialize_refuses_paths_with_nul_or_control_characters(
    tmp_path: Path, params: dict[str, Any], field: str
) -> None:
    sink = Sink()
    dispatcher = Dispatcher(create_server(tmp_path / "state"), sink)
    reply = await _ask(dispatcher, sink, "initialize",
                       {"processId": None, "capabilities": {}, **params})  # fmt: skip
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith(field)
    # Refused, so nothing changed: a clean initialize is still accepted.
    ok = await _ask(dispatcher, sink, "initialize", {"processId": None, "capabilities": {},
                                                     "rootUri": tmp_path.as_uri()})  # fmt: skip
    assert "result" in ok
