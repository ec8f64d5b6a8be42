"""Sessions are bounded (issue 25, item 7): editors rarely send ``session/close``, so a
session with no prompt running is closed after ``IDLE_SESSION_S`` (its MCP servers
stop, its log closes) and at most ``MAX_LIVE_SESSIONS`` stay open, the least recently
used idle one closed first. A closed session stays in the store: its next request
reopens it, checked as ``session/resume`` checks it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from cleveragents.acp import _agent
from cleveragents.tool import JsonRpcCode
from kit.acp_inprocess import InProcessAgent, in_process_agent
from kit.mcp import process_alive
from kit.models import scripted
from kit.paths import SDK_SERVER
from kit.wait import wait_for

MODEL = scripted({"content": "ok"})


def _server(pid_file: Path) -> dict[str, Any]:
    """The SDK test server, writing its pid first (the process whose end we check)."""
    code = (
        "import os, runpy, sys\n"
        f"open({str(pid_file)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        f"sys.argv = [{str(SDK_SERVER)!r}]\n"
        f"runpy.run_path({str(SDK_SERVER)!r}, run_name='__main__')\n"
    )
    return {"name": "calc", "command": sys.executable, "args": ["-c", code], "env": []}


async def _new(client: InProcessAgent, cwd: Path, **params: Any) -> str:
    reply = await client.request("session/new", {"cwd": str(cwd), "mcpServers": [], **params}, 30)
    assert "result" in reply, reply
    return str(reply["result"]["sessionId"])


async def test_an_idle_session_is_closed_and_its_next_prompt_reopens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_agent, "IDLE_SESSION_S", 0.2)
    monkeypatch.setattr(_agent, "_SWEEP_S", 0.05)
    pids = tmp_path / "pids"
    client = await in_process_agent(tmp_path / "state", MODEL)
    try:
        session = await _new(client, tmp_path, mcpServers=[_server(pids)])
        await wait_for(lambda: pids.exists() and pids.read_text().count("\n") == 1)
        first = int(pids.read_text().split()[0])
        assert process_alive(first)
        await wait_for(lambda: session not in client.agent.sessions)
        await wait_for(lambda: not process_alive(first))  # its MCP server ended with it
        assert session not in client.agent.store._logs
        reply = await client.request(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]},
            30,
        )  # fmt: skip
        assert reply.get("result") == {"stopReason": "end_turn"}, reply
        assert session in client.agent.sessions
        assert pids.read_text().count("\n") == 2  # its MCP server started again
    finally:
        await client.close()


async def test_no_more_than_the_bound_of_sessions_stay_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_agent, "MAX_LIVE_SESSIONS", 3)
    client = await in_process_agent(tmp_path / "state", MODEL)
    try:
        sessions = [await _new(client, tmp_path) for _ in range(6)]
        assert set(client.agent.sessions) == set(sessions[3:])
        # The oldest, closed to make room, still answers: reopened, another closed instead.
        reply = await client.request(
            "session/set_mode", {"sessionId": sessions[0], "modeId": "review"}
        )
        assert reply.get("result") == {}, reply
        assert sessions[0] in client.agent.sessions
        assert len(client.agent.sessions) == 3
        assert sessions[3] not in client.agent.sessions  # the least recently used
        closed = await client.request("session/close", {"sessionId": sessions[4]})
        assert closed.get("result") == {}, closed
        gone = await client.request("session/set_mode", {"sessionId": "f" * 32, "modeId": "ci"})
        assert gone["error"]["code"] == _agent.RESOURCE_NOT_FOUND
    finally:
        await client.close()


async def test_when_every_open_session_is_running_a_prompt_a_new_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_agent, "MAX_LIVE_SESSIONS", 1)
    client = await in_process_agent(tmp_path / "state", MODEL)
    try:
        busy = await _new(client, tmp_path)
        monkeypatch.setattr(_agent.AcpAgent, "_busy", staticmethod(lambda session: True))
        reply = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert reply["error"]["code"] == JsonRpcCode.INVALID_REQUEST
        assert "all 1 open sessions are running a prompt" in reply["error"]["message"]
        assert set(client.agent.sessions) == {busy}
    finally:
        await client.close()
