"""An ACP session's HTTP MCP server that needs a sign-in (OAuth) shows its sign-in page
as an agent message; once the user signs in there, the server's tools work in the
session (the loopback OAuth server of ``tests/mcp/servers/oauth_server.py``)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from kit.acp import Spawn, tool_updates
from kit.models import call, scripted
from kit.oauth import auth_server, browse
from kit.wait import wait_for


async def test_a_sign_in_is_shown_as_a_message_and_then_the_tools_work(
    spawn: Spawn, workspace: Path
) -> None:
    model = scripted({"toolCalls": [call("mcp:web/add", a=2, b=5)]}, {"content": "ok"})
    async with auth_server() as web:
        client = await spawn(model, "--profile", "full-auto")
        entry = {"type": "http", "name": "web", "url": web.url, "headers": []}
        session = (await client.new_session(workspace, mcpServers=[entry]))["sessionId"]

        def shown() -> str | None:
            for update in client.updates(session):
                text = str(update.get("content", {}).get("text", ""))
                if "needs you to sign in" in text:
                    return text
            return None

        await wait_for(lambda: shown() is not None, interval=0.05)
        text = shown()
        assert text is not None
        assert "The MCP server web needs you to sign in" in text
        found = re.search(r"(http://\S+/authorize\?\S+)", text)
        assert found is not None
        await asyncio.to_thread(browse, found.group(1))
        await wait_for(lambda: web.get("/stats")["code"] == 1, interval=0.05)
        for _ in range(50):  # the server lists its tools right after the token arrives
            assert await client.prompt(session, "add") == {"stopReason": "end_turn"}
            (*_, last) = list(tool_updates(client.updates(session)).values())[-1]
            if last["status"] == "completed":
                break
            await asyncio.sleep(0.1)
        assert last["status"] == "completed"
        assert "7" in last["content"][0]["content"]["text"]
