"""No token, client secret or authorization code of an MCP server's OAuth reaches a log
line, a record, a notification or a transcript: the real daemon at DEBUG signs in to
the loopback authorization server (``servers/oauth_server.py``) as a pre-registered
confidential client whose secret comes from the environment, opens the sign-in page
through the client's ``window/showDocument``, steps up to a wider scope in a run, and
every byte it wrote is searched for every secret the authorization server issued. The
same for enterprise-managed authorization (``servers/enterprise_server.py``): the
identity provider's code, ID token and refresh token, each ID-JAG, each access token and
both client secrets (from the environment)."""

from __future__ import annotations

import asyncio
import urllib.parse
from pathlib import Path
from typing import Any

from kit.enterprise import IDP_CLIENT_ID, IDP_SECRET, MCP_CLIENT_ID, MCP_SECRET, enterprise_server
from kit.oauth import PRE_SECRET, auth_server, browse
from kit.rawpeer import RawDaemon, serve

SHOW_DOCUMENT = {"window": {"showDocument": {"support": True}}}


def assert_nowhere(secrets: list[str], log: str, state: Path, daemon: RawDaemon) -> None:
    """No secret in the daemon's log, a file of its state dir (but the token files,
    0600, which keep them on purpose) or a message it sent."""
    written = [
        path.read_bytes().decode("utf-8", "replace")
        for path in state.rglob("*")
        if path.is_file() and path.parent.name != "mcp-auth"
    ]
    sent = [str(message) for message in daemon.messages]
    for secret in secrets:
        assert secret not in log
        assert not any(secret in text for text in written)
        assert not any(secret in text for text in sent)


async def test_no_secret_of_the_oauth_flow_is_logged_recorded_or_sent(tmp_path: Path) -> None:
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    opened: list[str] = []

    def client(method: str, params: dict[str, Any]) -> Any:
        assert method == "window/showDocument"
        assert params["external"] is True
        opened.append(params["uri"])
        browse(params["uri"])  # the editor's browser; the daemon's callback answers it
        return {"success": True}

    async with auth_server() as web:
        entry = {"name": "web", "url": web.url, "oauth": {"clientId": "pre"}, "trust": "read"}
        daemon = await RawDaemon.start(
            workspace, state, "--log-level", "debug", capabilities=SHOW_DOCUMENT,
            env={"CLEVERAGENTS_MCP_SECRET_WEB": PRE_SECRET}, options={"mcpServers": [entry]},
        )  # fmt: skip
        try:
            for msg_id in range(100, 300):  # mcp/servers until the sign-in is done
                daemon.send({"jsonrpc": "2.0", "id": msg_id, "method": "mcp/servers",
                             "params": {}})  # fmt: skip
                (status,) = (await serve(daemon, msg_id, client))["result"]["servers"]
                if status["status"] not in ("starting", "needsAuth"):
                    break
                await asyncio.sleep(0.1)
            assert status["status"] == "ready", status
            model = {"provider": "scripted", "script": [
                {"toolCalls": [{"name": "mcp:web/add", "arguments": {"a": 1, "b": 2}},
                               {"name": "mcp:web/admin", "arguments": {}}]},
                {"content": "done"}]}  # fmt: skip
            daemon.send({"jsonrpc": "2.0", "id": 2, "method": "run/start",
                         "params": {"prompt": "go", "runId": "r1", "model": model}})  # fmt: skip
            reply = await serve(daemon, 2, client)
            records = reply["result"]["toolCallHistory"]
            assert [r["output"] for r in records] == [{"result": 3}, {"result": "admin done"}]
            await daemon.call(3, "shutdown", None)
            daemon.send({"jsonrpc": "2.0", "method": "exit"})
            await daemon.wait_exit(10)
        finally:
            await daemon.kill()
        log = await asyncio.wait_for(daemon.stderr(), 10)
        issued = web.get("/stats")["issued"]
    assert len(opened) == 2  # the sign-in, then the step-up
    assert "DEBUG" in log
    secrets = [PRE_SECRET, *issued]
    assert len(secrets) >= 5  # two codes, two token pairs
    assert_nowhere(secrets, log, state, daemon)
    kept = (state / "mcp-auth" / "web.json").read_text()
    assert PRE_SECRET not in kept  # the entry's secret is never stored
    assert urllib.parse.urlsplit(opened[0]).query  # the page it opened was the real one


async def test_no_id_token_id_jag_or_secret_of_enterprise_authorization_leaks(
    tmp_path: Path,
) -> None:
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    opened: list[str] = []

    def client(method: str, params: dict[str, Any]) -> Any:
        assert method == "window/showDocument"
        opened.append(params["uri"])
        browse(params["uri"])  # the sign-in at the identity provider
        return {"success": True}

    async with enterprise_server("--authorization-endpoint") as web:
        oauth = {"grant": "identity_assertion", "clientId": MCP_CLIENT_ID,
                 "idp": {"issuer": web.idp, "clientId": IDP_CLIENT_ID}}  # fmt: skip
        entry = {"name": "corp", "url": web.url, "oauth": oauth, "trust": "read"}
        daemon = await RawDaemon.start(
            workspace, state, "--log-level", "debug", capabilities=SHOW_DOCUMENT,
            env={"CLEVERAGENTS_MCP_SECRET_CORP": MCP_SECRET,
                 "CLEVERAGENTS_MCP_IDP_SECRET_CORP": IDP_SECRET},
            options={"mcpServers": [entry]},
        )  # fmt: skip
        try:
            for msg_id in range(100, 300):
                daemon.send({"jsonrpc": "2.0", "id": msg_id, "method": "mcp/servers",
                             "params": {}})  # fmt: skip
                (status,) = (await serve(daemon, msg_id, client))["result"]["servers"]
                if status["status"] not in ("starting", "needsAuth"):
                    break
                await asyncio.sleep(0.1)
            assert status["status"] == "ready", status
            web.get("/revoke")  # the run's call makes a second exchange, with the kept token
            model = {"provider": "scripted", "script": [
                {"toolCalls": [{"name": "mcp:corp/add", "arguments": {"a": 1, "b": 2}}]},
                {"content": "done"}]}  # fmt: skip
            daemon.send({"jsonrpc": "2.0", "id": 2, "method": "run/start",
                         "params": {"prompt": "go", "runId": "r1", "model": model}})  # fmt: skip
            reply = await serve(daemon, 2, client)
            assert [r["output"] for r in reply["result"]["toolCallHistory"]] == [{"result": 3}]
            await daemon.call(3, "shutdown", None)
            daemon.send({"jsonrpc": "2.0", "method": "exit"})
            await daemon.wait_exit(10)
        finally:
            await daemon.kill()
        log = await asyncio.wait_for(daemon.stderr(), 10)
        stats = web.get("/stats")
    assert len(opened) == 1
    assert (stats["exchange"], stats["jwt_bearer"]) == (2, 2)
    secrets = [MCP_SECRET, IDP_SECRET, *stats["issued"]]
    assert len(secrets) >= 8  # a code, ID token, refresh token, two ID-JAGs, two tokens...
    assert_nowhere(secrets, log, state, daemon)
    kept = (state / "mcp-auth" / "corp.json").read_text()
    assert MCP_SECRET not in kept
    assert IDP_SECRET not in kept
