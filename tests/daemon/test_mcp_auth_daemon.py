"""Through the real daemon: ``mcp/login`` and ``mcp/logout`` on the wire (a run's own
server named by its ``runId``, while the editor's model holds the run), a server that
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


async def test_a_runs_own_server_signs_in_again_by_its_run_id(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with auth_server() as web:
        daemon = await RawDaemon.start(
            workspace, tmp_path / "state",
            capabilities={"experimental": {"cleveragents": {"llm": True}}},
        )  # fmt: skip
        try:
            entry = {"name": "own", "url": web.url}
            daemon.send({"jsonrpc": "2.0", "id": 1, "method": "run/start", "params": {
                "prompt": "go", "runId": "r1", "model": "client", "mcpServers": [entry]}})  # fmt: skip
            while (asked := await daemon.next()).get("method") != "llm/generate":
                pass  # the editor's model holds the run while its server waits
            own = await settled_in_run(daemon, 100, "starting")
            assert (own["scope"], own["status"]) == ("run", "needsAuth")
            assert (await daemon.call(2, "mcp/login", {"name": "own"}))["error"]["code"] == -32012
            reply = await daemon.call(3, "mcp/login", {"name": "own", "runId": "nope"})
            assert reply["error"]["code"] == -32022
            reply = await daemon.call(4, "mcp/login", {"name": "own", "runId": "r1"})
            again = reply["result"]["server"]
            assert again["status"] == "needsAuth"
            assert again["authorizationUrl"] != own["authorizationUrl"]  # a new sign-in
            await asyncio.to_thread(browse, again["authorizationUrl"])
            assert (await settled_in_run(daemon, 400, "needsAuth", "starting"))["status"] == "ready"
            call = {"id": "t1", "name": "mcp:own/add", "arguments": {"a": 2, "b": 5}}
            daemon.send({"jsonrpc": "2.0", "id": asked["id"],
                         "result": {"content": "", "toolCalls": [call]}})  # fmt: skip
            while "id" not in (message := await daemon.next()) or message["id"] != 1:
                if message.get("method") == "llm/generate":
                    daemon.send({"jsonrpc": "2.0", "id": message["id"],
                                 "result": {"content": "done", "toolCalls": []}})  # fmt: skip
            result = message["result"]
            assert [r["output"] for r in result["toolCallHistory"]] == [{"result": 7}]
            reply = await daemon.call(5, "mcp/logout", {"name": "own", "runId": "r1"})
            assert reply["error"]["code"] == -32022  # the run is over: so are its servers
        finally:
            await daemon.kill()


async def settled_in_run(daemon: RawDaemon, first_id: int, *waiting: str) -> dict[str, Any]:
    for msg_id in range(first_id, first_id + 300):
        reply = await daemon.call(msg_id, "mcp/servers", {"runId": "r1"})
        (status,) = [s for s in reply["result"]["servers"] if s["name"] == "own"]
        if status["status"] not in waiting:
            return status  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)
    raise AssertionError(f"still {waiting}")


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
