"""What an MCP server asks, through the real daemon: ``mcp/elicit`` to a client that
declared the capability (accept, decline, cancel), a decline for one that did not;
``run/toolCallProgress`` of a call; the roots as the workspace folders and their change
after ``didChangeWorkspaceFolders``."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from cleveragents.protocol import methods as m
from kit.lsp import SERVE, Session, attach, initialize_params, make_client
from kit.models import call, scripted
from kit.paths import MCP_SERVERS

ASKING = MCP_SERVERS / "asking_server.py"
ENTRY = {"name": "ask", "command": sys.executable, "args": [str(ASKING)]}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVE, client_factory=make_client))
async def asked(lsp_client: LanguageClient, workspace: Path, state_dir: Path) -> AsyncIterator[Any]:
    """The real daemon, initialized by a client that answers ``mcp/elicit`` from
    ``session.elicit_answers`` (and keeps what it was asked in ``session.elicited``)."""
    current = Session(lsp_client, workspace, state_dir)
    attach(lsp_client, current)
    elicited: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []

    @lsp_client.feature(m.MCP_ELICIT)
    async def elicit(params: dict[str, Any]) -> Any:
        elicited.append(params)
        return answers.pop(0)

    experimental = {"cleveragents": {"permissions": True, "elicitation": True}}
    await lsp_client.initialize_session(
        initialize_params(workspace, state_dir, experimental=experimental, mcpServers=[ENTRY])
    )
    current.elicited = elicited  # type: ignore[attr-defined]
    current.elicit_answers = answers  # type: ignore[attr-defined]
    lsp_client.session = current  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def run_tool(session: Session, run_id: str, tool: str, **args: Any) -> dict[str, Any]:
    model = scripted({"toolCalls": [call(f"mcp:ask/{tool}", **args)]}, {"content": "done"})
    result = await session.request(m.RUN_START, {"prompt": "go", "runId": run_id, "model": model})
    assert result["status"] == "completed", result
    (record,) = result["toolCallHistory"]
    return record  # type: ignore[no-any-return]


async def test_an_elicitation_is_asked_of_the_client_with_its_run(asked: Any) -> None:
    session = asked.session
    answers = [
        ({"action": "accept", "content": {"name": "Ada", "age": 36}}, "accept:Ada:36"),
        ({"action": "decline"}, "decline"),
        ({"action": "cancel"}, "cancel"),
    ]
    for number, (answer, output) in enumerate(answers, 1):
        session.elicit_answers.append(answer)
        record = await run_tool(session, f"r1-{number}", "ask_name")
        assert record["output"] == output
        params = session.elicited[-1]
        assert params["server"] == "ask"
        assert params["runId"] == f"r1-{number}"
        assert params["mode"] == "form"
    assert params["message"] == "What is your name?"
    assert params["requestedSchema"]["properties"]["name"]["type"] == "string"
    assert len(session.elicited) == 3


async def test_an_answer_that_misses_the_schema_is_refused_to_the_server(asked: Any) -> None:
    session = asked.session
    session.elicit_answers.append({"action": "accept", "content": {"age": "old"}})
    record = await run_tool(session, "r2", "ask_name")
    assert record["output"].startswith("error:")
    assert "requested schema" in record["output"]


async def test_a_url_elicitation_reaches_the_client_with_its_url(asked: Any) -> None:
    session = asked.session
    session.elicit_answers.append({"action": "accept"})
    assert (await run_tool(session, "r3", "open_link"))["output"] == "accept"
    (params,) = session.elicited
    assert params["mode"] == "url"
    assert params["url"] == "https://example.com/login"
    assert "requestedSchema" not in params


async def test_a_client_without_the_capability_is_never_asked(session: Session) -> None:
    await session.request(m.MCP_ADD, {"servers": [ENTRY]})
    record = await run_tool(session, "r4", "ask_name")
    assert record["output"] == "decline"


async def test_a_calls_progress_is_a_run_notification(session: Session) -> None:
    await session.request(m.MCP_ADD, {"servers": [ENTRY]})
    record = await run_tool(session, "r5", "progress", count=500)
    assert record["output"] == "done"
    progress = [p for method, p in session.for_run("r5") if method == m.RUN_TOOL_CALL_PROGRESS]
    assert 1 <= len(progress) < 100  # coalesced
    assert all(p["callId"] == record["callId"] for p in progress)
    assert progress[-1]["progress"] == 500
    assert progress[-1]["total"] == 500
    assert progress[-1]["message"] == "step 500"
    seqs = [p["seq"] for method, p in session.for_run("r5")]
    assert seqs == sorted(seqs)
    lines = (session.state_dir / "runs" / "r5.jsonl").read_text()
    assert m.RUN_TOOL_CALL_PROGRESS in lines  # the transcript keeps them


async def test_roots_are_the_workspace_folders_and_follow_their_change(
    session: Session, tmp_path: Path
) -> None:
    await session.request(m.MCP_ADD, {"servers": [ENTRY]})
    record = await run_tool(session, "r6", "roots")
    assert record["output"] == session.workspace.as_uri()

    other = tmp_path / "other"
    other.mkdir()
    waiting = session.start(runId="r7", model=scripted(
        {"toolCalls": [call("mcp:ask/wait_roots_change")]}, {"content": "done"}))  # fmt: skip
    await session.wait_for(lambda method, p: method == m.RUN_TOOL_CALL_STARTED and
                           p["runId"] == "r7")  # fmt: skip
    await asyncio.sleep(0.3)  # the call reached the server, which now waits
    session.client.workspace_did_change_workspace_folders(
        lsp.DidChangeWorkspaceFoldersParams(
            lsp.WorkspaceFoldersChangeEvent(
                added=[lsp.WorkspaceFolder(other.as_uri(), "other")], removed=[]
            )
        )
    )
    result = await waiting
    (record,) = result["toolCallHistory"]
    assert record["output"].splitlines() == [session.workspace.as_uri(), other.as_uri()]
