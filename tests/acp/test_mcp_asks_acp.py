"""What an MCP server asks, through the ACP face: a call's progress as
``tool_call_update``s of that call, the session's folders as the server's roots, and
an elicitation declined (ACP has no request to put it to the user)."""

from __future__ import annotations

import sys
from pathlib import Path

from kit.acp import Spawn, tool_updates
from kit.models import call, scripted
from kit.paths import MCP_SERVERS, SDK_SERVER

ASKING = {
    "name": "ask",
    "command": sys.executable,
    "args": [str(MCP_SERVERS / "asking_server.py")],
    "env": [],
}


async def test_progress_is_shown_on_the_call_and_the_final_content_replaces_it(
    spawn: Spawn, workspace: Path
) -> None:
    model = scripted({"toolCalls": [call("mcp:ask/progress", count=300)]}, {"content": "ok"})
    client = await spawn(model, "--profile", "full-auto")
    session = (await client.new_session(workspace, mcpServers=[ASKING]))["sessionId"]
    assert await client.prompt(session, "go") == {"stopReason": "end_turn"}
    (updates,) = tool_updates(client.updates(session)).values()
    progress = [u for u in updates if "_meta" in u]
    assert 1 <= len(progress) < 60  # coalesced
    assert all(u["status"] == "in_progress" for u in progress)
    last = progress[-1]
    assert last["_meta"]["cleveragents"] == {"progress": 300, "total": 300}
    assert last["content"][0]["content"]["text"] == "300 of 300: step 300"
    assert updates[-1]["status"] == "completed"
    assert updates[-1]["content"][0]["content"]["text"] == "done"


async def test_the_sessions_folders_are_the_roots_and_elicitation_is_declined(
    spawn: Spawn, workspace: Path, tmp_path: Path
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    model = scripted(
        {"toolCalls": [call("mcp:ask/roots"), call("mcp:ask/ask_name")]}, {"content": "ok"}
    )
    client = await spawn(model, "--profile", "full-auto")
    reply = await client.new_session(
        workspace, mcpServers=[ASKING], additionalDirectories=[str(extra)]
    )
    session = reply["sessionId"]
    assert await client.prompt(session, "go") == {"stopReason": "end_turn"}
    roots, asked = (u[-1] for u in tool_updates(client.updates(session)).values())
    assert roots["content"][0]["content"]["text"].splitlines() == [
        workspace.as_uri(),
        extra.as_uri(),
    ]
    assert asked["content"][0]["content"]["text"] == "decline"


async def test_an_mcp_tools_image_is_an_image_content_block(spawn: Spawn, workspace: Path) -> None:
    model = scripted({"toolCalls": [call("mcp:calc/picture")]}, {"content": "a dot"})
    client = await spawn(model, "--profile", "full-auto")
    calc = {"name": "calc", "command": sys.executable, "args": [str(SDK_SERVER)], "env": []}
    session = (await client.new_session(workspace, mcpServers=[calc]))["sessionId"]
    assert await client.prompt(session, "look") == {"stopReason": "end_turn"}
    (updates,) = tool_updates(client.updates(session)).values()
    text, image = updates[-1]["content"]
    assert text["content"]["text"] == "a red dot\n[image: image/png, 72 B]"  # no base64
    assert image == {"type": "content", "content": {
        "type": "image", "mimeType": "image/png", "data": updates[-1]["rawOutput"][1]["data"]}}  # fmt: skip
    assert updates[-1]["rawOutput"][1]["type"] == "image"  # the record keeps the blocks
