"""MCP servers through the real daemon: configured daemon-wide (mcp/add), per run
(run/start.mcpServers) and removed; their tools beside builtin and client tools in one
run; a server that fails leaves the daemon serving, and mcp/servers says what happened."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from cleveragents.protocol import methods as m
from kit.lsp import Session
from kit.models import call, scripted
from kit.paths import SDK_SERVER


def stdio(name: str, *args: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [str(SDK_SERVER), *args], **extra}


async def _servers(session: Session, **params: Any) -> dict[str, dict[str, Any]]:
    reply = await session.request(m.MCP_SERVERS, params)
    return {s["name"]: s for s in reply["servers"]}


async def _ready(session: Session, name: str) -> None:
    await session.wait_for(lambda method, p: method == m.TOOLS_CHANGED and p["server"] == name,
                           timeout=15)  # fmt: skip


async def test_an_mcp_tool_runs_beside_a_builtin_and_a_client_tool(session: Session) -> None:
    added = await session.request(m.MCP_ADD, {"servers": [stdio("calc")]})
    assert added == {"added": ["calc"]}
    await _ready(session, "calc")
    listed = (await session.request(m.TOOLS_LIST, {}))["tools"]
    sources = {t["name"]: t["source"] for t in listed}
    assert sources["mcp:calc/add"] == "mcp"
    assert sources["builtin/file-read"] == "builtin"
    (status,) = (await _servers(session)).values()
    assert (status["scope"], status["transport"], status["status"]) == ("daemon", "stdio", "ready")
    assert status["toolCount"] == len([n for n in sources if n.startswith("mcp:calc/")])
    assert status["protocolVersion"]

    await session.request(m.TOOLS_REGISTER, {"tools": [
        {"name": "client/echo", "description": "Echo.", "inputSchema": {"type": "object"},
         "annotations": {"readOnly": True}}]})  # fmt: skip
    model = scripted({"toolCalls": [call("builtin/file-read", path="hello.txt"),
                                    call("client/echo", text="hi"),
                                    call("mcp:calc/add", a=2, b=3)]},
                     {"content": "done"})  # fmt: skip
    result = await session.request(m.RUN_START, {"prompt": "go", "runId": "mix", "model": model})
    assert result["status"] == "completed"
    read, echo, add = result["toolCallHistory"]
    assert [read["success"], echo["success"], add["success"]] == [True, True, True]
    assert add["toolName"] == "mcp:calc/add"
    assert add["inputs"] == {"a": 2, "b": 3}
    assert "5" in json.dumps(add["output"])
    assert add["durationMs"] > 0
    started = next(p for method, p in session.for_run("mix") if method == m.RUN_STARTED)
    assert "mcp:calc/add" in started["tools"]
    lines = [json.loads(line) for line in
             (session.state_dir / "runs" / "mix.jsonl").read_text().splitlines()]  # fmt: skip
    recorded = [e["params"]["record"] for e in lines if e["method"] == m.RUN_TOOL_CALL]
    assert sorted(r["toolName"] for r in recorded) == sorted(
        ["builtin/file-read", "client/echo", "mcp:calc/add"])  # fmt: skip
    assert lines[-1]["params"]["result"] == result


async def test_a_server_that_fails_to_start_is_reported_and_the_daemon_serves_on(
    session: Session,
) -> None:
    broken = {"name": "broken", "command": sys.executable,
              "args": ["-c", "import sys; sys.stderr.write('cannot start: no config\\n'); "
                             "sys.exit(3)"]}  # fmt: skip
    await session.request(m.MCP_ADD, {"servers": [broken]})
    result = await session.request(m.RUN_START, {"prompt": "go", "model": scripted(
        {"toolCalls": [call("mcp:broken/anything")]}, {"content": "still here"})})  # fmt: skip
    assert result["status"] == "completed"
    (record,) = result["toolCallHistory"]
    assert record["success"] is False
    status = (await _servers(session))["broken"]
    assert status["status"] == "failed"
    assert status["error"]
    assert "cannot start: no config" in status["stderrTail"]
    await _ready(session, "broken")  # tools/changed told the editor it settled, failed


async def test_a_crash_mid_call_fails_that_record_and_the_next_call_restarts_it(
    session: Session,
) -> None:
    await session.request(m.MCP_ADD, {"servers": [stdio("fragile")]})
    await _ready(session, "fragile")
    model = scripted({"toolCalls": [call("mcp:fragile/crash", code=7)]},
                     {"toolCalls": [call("mcp:fragile/add", a=1, b=1)]},
                     {"content": "done"})  # fmt: skip
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model,
                                                 "automationProfile": "trusted"})  # fmt: skip
    crashed, added = result["toolCallHistory"]
    assert crashed["success"] is False
    assert added["success"] is True
    assert (await _servers(session))["fragile"]["status"] == "ready"


async def test_a_run_scoped_server_lives_only_for_its_run(session: Session) -> None:
    model = scripted({"toolCalls": [call("mcp:mine/add", a=20, b=22)]}, {"content": "done"})
    result = await session.request(m.RUN_START, {
        "prompt": "go", "runId": "scoped", "model": model,
        "mcpServers": [stdio("mine")]})  # fmt: skip
    (record,) = result["toolCallHistory"]
    assert record["success"] is True
    assert "42" in json.dumps(record["output"])
    started = next(p for method, p in session.for_run("scoped") if method == m.RUN_STARTED)
    assert "mcp:mine/add" in started["tools"]
    assert await _servers(session) == {}
    names = [t["name"] for t in (await session.request(m.TOOLS_LIST, {}))["tools"]]
    assert not [n for n in names if n.startswith("mcp:")]


async def test_removing_a_server_takes_its_tools_away(session: Session) -> None:
    await session.request(m.MCP_ADD, {"servers": [stdio("gone")]})
    await _ready(session, "gone")
    assert await session.request(m.MCP_REMOVE, {"names": ["gone"]}) == {"removed": ["gone"]}
    names = [t["name"] for t in (await session.request(m.TOOLS_LIST, {}))["tools"]]
    assert not [n for n in names if n.startswith("mcp:gone/")]
    assert await _servers(session) == {}
    changes = [p for method, p in session.events if method == m.TOOLS_CHANGED]
    assert changes[-1] == {"source": "mcp", "server": "gone"}


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"name": "both", "command": "x", "url": "http://127.0.0.1:1/mcp"}, "params.servers[0]"),
        ({"name": "neither"}, "params.servers[0]"),
        ({"name": "bad name!", "command": "x"}, "params.servers[0].name"),
        ({"name": "t", "command": "x", "timeoutMs": 0}, "params.servers[0].timeoutMs"),
        ({"name": "t", "comand": "x"}, "params.servers[0]"),
    ],
)
async def test_a_bad_server_entry_is_invalid_params_naming_the_field(
    session: Session, entry: dict[str, Any], field: str
) -> None:
    with pytest.raises(JsonRpcException) as caught:
        await session.request(m.MCP_ADD, {"servers": [entry]})
    assert caught.value.code == -32602
    assert str(caught.value.message).startswith(field)
    assert await _servers(session) == {}


async def test_a_name_already_configured_is_refused(session: Session) -> None:
    await session.request(m.MCP_ADD, {"servers": [stdio("twice")]})
    with pytest.raises(JsonRpcException) as caught:
        await session.request(m.MCP_ADD, {"servers": [stdio("twice")]})
    assert caught.value.code == -32602
    assert "already configured" in str(caught.value.message)


async def test_a_list_change_reaches_the_next_iteration_and_the_editor(session: Session) -> None:
    await session.request(m.MCP_ADD, {"servers": [stdio("grow", trust="read")]})
    await _ready(session, "grow")
    before = sum(1 for method, _ in session.events if method == m.TOOLS_CHANGED)
    add_tool = {"name": "mcp:grow/add_tool", "arguments": {"name": "fresh"}}
    model = scripted({"toolCalls": [add_tool]},
                     {"toolCalls": [call("mcp:grow/fresh")]},
                     {"content": "done"})  # fmt: skip
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model})
    added, fresh = result["toolCallHistory"]
    assert added["success"] is True
    assert fresh["success"] is True, fresh["error"]
    assert "I am fresh" in json.dumps(fresh["output"])
    changes = [p for method, p in session.events if method == m.TOOLS_CHANGED][before:]
    assert {"source": "mcp", "server": "grow"} in changes
    names = [t["name"] for t in (await session.request(m.TOOLS_LIST, {}))["tools"]]
    assert "mcp:grow/fresh" in names


async def test_a_run_waiting_for_its_server_can_be_cancelled(session: Session) -> None:
    silent = {"name": "silent", "command": sys.executable,
              "args": ["-c", "import time; time.sleep(60)"], "startupTimeoutMs": 60000}  # fmt: skip
    pending = session.start(
        runId="waits", model=scripted({"content": "never"}), mcpServers=[silent]
    )
    async with asyncio.timeout(10):
        while True:  # the run exists (and waits for its server) once run/cancel finds it
            try:
                await session.request(m.RUN_CANCEL, {"runId": "waits"})
                break
            except JsonRpcException:
                await asyncio.sleep(0.05)
    async with asyncio.timeout(10):  # well before the server's 60 s startup timeout
        result = await pending
    assert result["status"] == "cancelled"
