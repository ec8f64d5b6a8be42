"""Through the real daemon: ``mcp/login`` and ``mcp/logout`` on the wire, a server that
waits for a sign-in reported as ``needsAuth`` with its ``authorizationUrl`` (to a client
that cannot open pages), and the record of a call of a tool whose server failed, which
names the server, its error and its stderr rather than an unknown tool."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from kit.oauth import auth_server, browse
from kit.rawpeer import RawDaemon

BROKEN = {
    "name": "broken",
    "command": sys.executable,
    "args": ["-c", "import sys; sys.stderr.write('no config here\\n'); sys.exit(3)"],
}


async def status_of(daemon: RawDaemon, msg_id: int) -> dict[str, Any]:
    reply = await daemon.call(msg_id, "mcp/servers", {})
    (status,) = reply["result"]["servers"]
    return status  # type: ignore[no-any-return]


async def settled(daemon: RawDaemon, first_id: int, *waiting: str) -> dict[str, Any]:
    for msg_id in range(first_id, first_id + 300):
        status = await status_of(daemon, msg_id)
        if status["status"] not in waiting:
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"still {waiting}")


async def test_login_and_logout_on_the_wire(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with auth_server() as web:
        entry = {"name": "web", "url": web.url}
        daemon = await RawDaemon.start(
            workspace, tmp_path / "state", options={"mcpServers": [entry]}
        )
        try:
            waiting = await settled(daemon, 10, "starting")
            assert waiting["status"] == "needsAuth"
            assert waiting["authorizationUrl"].startswith(f"{web.base}/authorize?")
            await asyncio.to_thread(browse, waiting["authorizationUrl"])
            assert (await settled(daemon, 400, "needsAuth", "starting"))["status"] == "ready"

            reply = await daemon.call(2, "mcp/logout", {"name": "web"})
            assert reply["result"]["forgotten"] is True
            assert reply["result"]["server"]["status"] == "needsAuth"
            assert "mcp/login" in reply["result"]["server"]["error"]
            assert not (tmp_path / "state" / "mcp-auth" / "web.json").exists()

            reply = await daemon.call(3, "mcp/login", {"name": "web"})
            server = reply["result"]["server"]
            assert server["status"] == "needsAuth"
            await asyncio.to_thread(browse, server["authorizationUrl"])
            assert (await settled(daemon, 800, "needsAuth", "starting"))["status"] == "ready"

            reply = await daemon.call(4, "mcp/login", {"name": "nope"})
            assert reply["error"]["code"] == -32012
        finally:
            await daemon.kill()


async def test_a_call_of_a_failed_servers_tool_names_the_server_and_why(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    daemon = await RawDaemon.start(workspace, tmp_path / "state", options={"mcpServers": [BROKEN]})
    try:
        assert (await settled(daemon, 10, "starting"))["status"] == "failed"
        model = {
            "provider": "scripted",
            "script": [
                {"toolCalls": [{"name": "mcp:broken/echo", "arguments": {}}]},
                {"content": "done"},
            ],
        }
        reply = await daemon.call(2, "run/start", {"prompt": "go", "model": model})
        (record,) = reply["result"]["toolCallHistory"]
        assert record["success"] is False
        assert record["error"].startswith("mcp:broken/echo: MCP server broken is down: ")
        assert "no config here" in record["error"]
        assert "unknown tool" not in record["error"]
    finally:
        await daemon.kill()
