"""Sessions over ACP: modes and config options, list/load/resume/close across a daemon
restart, and MCP servers from ``session/new``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from cleveragents.acp._agent import RESOURCE_NOT_FOUND
from cleveragents.tool import JsonRpcCode
from kit.acp import Spawn, tool_updates
from kit.models import call, scripted
from kit.paths import SDK_SERVER

WRITE = scripted(
    {"content": "Writing.", "toolCalls": [call("builtin/file-write", path="a.txt", content="A")]},
    {"content": "Written."},
)


async def _allow(method: str, params: Any) -> Any:
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


async def test_new_session_offers_the_profiles_as_modes_and_config_options(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(WRITE, "--profile", "trusted")
    reply = await client.new_session(workspace)
    assert reply["modes"]["currentModeId"] == "trusted"
    assert {m["id"] for m in reply["modes"]["availableModes"]} >= {"supervised", "full-auto"}
    options = {o["id"]: o for o in reply["configOptions"]}
    assert options["mode"]["currentValue"] == "trusted"
    assert options["mode"]["category"] == "mode"
    assert options["model"]["category"] == "model"


async def test_set_mode_changes_what_is_asked_and_is_announced(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(WRITE)
    asked: list[Any] = []

    async def allow(method: str, params: Any) -> Any:
        asked.append(params)
        return await _allow(method, params)

    client.on_request = allow
    session = (await client.new_session(workspace))["sessionId"]
    await client.prompt(session, "one")
    assert len(asked) == 1  # supervised asks before writes
    assert (
        await client.request("session/set_mode", {"sessionId": session, "modeId": "trusted"}) == {}
    )
    updates = [u["sessionUpdate"] for u in client.updates(session)]
    assert "current_mode_update" in updates
    assert "config_option_update" in updates
    await client.prompt(session, "two")
    assert len(asked) == 1  # trusted does not
    reply = await client.request(
        "session/set_config_option", {"sessionId": session, "configId": "mode", "value": "review"}
    )
    assert {o["id"]: o["currentValue"] for o in reply["configOptions"]}["mode"] == "review"
    bad = await client.raw_request("session/set_mode", {"sessionId": session, "modeId": "nonsense"})
    assert bad["error"]["code"] == JsonRpcCode.INVALID_PARAMS


async def test_list_load_and_resume_work_after_a_daemon_restart(
    spawn: Spawn, workspace: Path
) -> None:
    first = await spawn(WRITE)
    first.on_request = _allow
    session = (await first.new_session(workspace))["sessionId"]
    await first.prompt(session, "write the file please")
    live = first.updates(session)
    assert await first.close() == 0

    second = await spawn(WRITE)
    listed = (await second.request("session/list", {}))["sessions"]
    assert [(s["sessionId"], s["title"]) for s in listed] == [(session, "write the file please")]
    assert listed[0]["cwd"] == str(workspace)
    reply = await second.request(
        "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    )
    assert reply["modes"]["currentModeId"] == "supervised"
    replayed = second.updates(session)
    assert replayed[0] == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "write the file please"},
    }
    # The replay ends each tool call in the state the live turn left it.
    final_live = {k: v[-1] for k, v in tool_updates(live).items()}
    final_replayed = {k: v[-1] for k, v in tool_updates(replayed).items()}
    assert final_replayed == final_live
    assert [u["status"] for u in next(iter(tool_updates(replayed).values()))] == [
        "pending", "completed"
    ]  # fmt: skip
    # The conversation goes on from the loaded turn, and resume reattaches without replay.
    second.on_request = _allow
    assert await second.prompt(session, "again") == {"stopReason": "end_turn"}
    await second.close()

    third = await spawn(WRITE)
    count = len(third.lines)
    await third.request(
        "session/resume", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    )
    # No replay: only the slash commands are announced again (after the answer), to the
    # new client.
    await third.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
        )
    )
    after = [line for line in third.lines[count:] if line.get("method")]
    assert [line["params"]["update"]["sessionUpdate"] for line in after] == [
        "available_commands_update"
    ]
    assert await third.request("session/close", {"sessionId": session}) == {}
    gone = await third.raw_request("session/prompt", {"sessionId": session, "prompt": []})
    assert gone["error"]["code"] == RESOURCE_NOT_FOUND


async def test_mcp_servers_from_session_new_are_started_and_their_tools_called(
    spawn: Spawn, workspace: Path
) -> None:
    model = scripted(
        {"toolCalls": [call("mcp:calc/add", a=2, b=3)]},
        {"content": "five"},
    )
    client = await spawn(model, "--profile", "full-auto")
    server = {"name": "calc", "command": sys.executable, "args": [str(SDK_SERVER)], "env": []}
    session = (await client.new_session(workspace, mcpServers=[server]))["sessionId"]
    assert await client.prompt(session, "add") == {"stopReason": "end_turn"}
    (add,) = tool_updates(client.updates(session)).values()
    assert add[0]["kind"] == "read"  # readOnlyHint
    assert add[-1]["status"] == "completed"
    assert "5" in add[-1]["content"][0]["content"]["text"]


async def test_an_mcp_server_that_fails_to_start_is_reported_after_the_answer(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(scripted({"content": "ok"}))
    broken = {"name": "broken", "command": "/nonexistent/server", "args": [], "env": []}
    reply = await client.new_session(workspace, mcpServers=[broken])
    session = reply["sessionId"]
    report = await client.wait_for(lambda line: line.get("method") == "session/update")
    assert client.lines.index(report) > next(
        i for i, line in enumerate(client.lines) if line.get("result") is reply
    )
    text = report["params"]["update"]["content"]["text"]
    assert report["params"]["sessionId"] == session
    assert "broken" in text
    bad = await client.raw_request(
        "session/new",
        {"cwd": str(workspace), "mcpServers": [{"type": "sse", "name": "s", "url": "http://x"}]},
    )
    assert bad["error"]["code"] == JsonRpcCode.INVALID_PARAMS


async def test_a_session_id_is_exactly_its_pattern_and_a_root_is_never_slash_or_home(
    spawn: Spawn, workspace: Path
) -> None:
    """A session id with a trailing newline is not the session's id (``$`` would let it
    through); ``/`` and the home directory are refused as roots, as ``cleveragents run``
    refuses them, and the agent goes on serving."""
    client = await spawn(WRITE)
    session = (await client.new_session(workspace))["sessionId"]
    for method in ("session/load", "session/resume"):
        reply = await client.raw_request(
            method, {"sessionId": session + "\n", "cwd": str(workspace), "mcpServers": []}
        )
        assert reply["error"]["code"] == JsonRpcCode.INVALID_PARAMS
    for params in ({"cwd": "/", "mcpServers": []}, {"cwd": str(Path.home()), "mcpServers": []},
                   {"cwd": str(workspace), "additionalDirectories": ["/"], "mcpServers": []}):  # fmt: skip
        reply = await client.raw_request("session/new", params)
        assert reply["error"]["code"] == JsonRpcCode.INVALID_PARAMS
        assert "refusing" in reply["error"]["message"]
    assert "sessionId" in await client.new_session(workspace)
