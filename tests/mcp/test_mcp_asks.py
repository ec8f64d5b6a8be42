"""What a real SDK server asks of us while it serves a call: elicitation (form and URL
modes, each answer, the schema check), roots and their change, progress (coalesced)
and log messages (to its log file, bounded)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from cleveragents.mcp import (
    ClientHooks,
    Elicitation,
    ElicitationAnswer,
    McpServer,
    ProtocolVersion,
)
from cleveragents.tool import CancelToken, ToolActorContext, ToolCallContext
from kit.mcp import make_server, stdio
from kit.paths import MCP_SERVERS
from kit.wait import WAIT_S, wait_for

ASKING = MCP_SERVERS / "asking_server.py"

# One loop and one server for the module (each start costs the SDK's import time in the
# server); each test lends it hooks of its own. One xdist worker for the module.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("mcp-asks")]


class Switch(ClientHooks):
    """Hooks that pass everything to ``target``: a connection keeps the hooks it was
    started with, so the shared server's are switched per test through this one."""

    def __init__(self) -> None:
        self.target = ClientHooks()

    def roots(self) -> list[str]:
        return self.target.roots()

    def progress(
        self, call: ToolCallContext, progress: float, total: float | None, message: str | None
    ) -> None:
        self.target.progress(call, progress, total, message)

    async def elicit(self, call: ToolCallContext | None, request: Elicitation) -> ElicitationAnswer:
        return await self.target.elicit(call, request)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpServer]:
    server = make_server(stdio("a", ASKING), tmp_path_factory.mktemp("asks"))
    server.hooks = Switch()
    server.start()
    try:
        await server.wait_ready(WAIT_S)
        assert server.status == "ready", server.error
        yield server
    finally:
        await server.stop()


def call_context(call_id: str = "call-1") -> ToolCallContext:
    return ToolCallContext(call_id, "mcp:a/x", 1, {}, ToolActorContext(), CancelToken())


class Hooks(ClientHooks):
    """Answers as a user would, and keeps what it was asked and told."""

    def __init__(self, answer: ElicitationAnswer | None = None, roots: list[str] | None = None):
        self.answer = answer
        self.asked: list[tuple[ToolCallContext | None, Elicitation]] = []
        self.progressed: list[tuple[str, float, float | None, str | None]] = []
        self.folders = roots or []

    async def elicit(self, call: ToolCallContext | None, request: Elicitation) -> ElicitationAnswer:
        self.asked.append((call, request))
        assert self.answer is not None
        return self.answer

    def roots(self) -> list[str]:
        return list(self.folders)

    def progress(
        self, call: ToolCallContext, progress: float, total: float | None, message: str | None
    ) -> None:
        self.progressed.append((call.call_id, progress, total, message))


async def call(
    hooks: ClientHooks,
    where: McpServer | Path,
    tool: str,
    args: dict[str, Any],
    protocol: ProtocolVersion | None = None,
) -> Any:
    """``tool`` called on the shared server, or on a server of its own in ``where``."""
    if isinstance(where, McpServer):
        assert isinstance(where.hooks, Switch)
        where.hooks.target = hooks
        async with asyncio.timeout(WAIT_S):
            return await where.call_tool(tool, args, call_context())
    server = make_server(stdio("a", ASKING, protocol=protocol), where)
    server.hooks = hooks
    server.start()
    try:
        await server.wait_ready(WAIT_S)
        assert server.status == "ready", server.error
        async with asyncio.timeout(WAIT_S):
            return await server.call_tool(tool, args, call_context())
    finally:
        await server.stop()


@pytest.mark.parametrize("protocol", [None, "2026-07-28"])
async def test_an_accepted_form_goes_back_to_the_server_with_its_content(
    shared: McpServer, tmp_path: Path, protocol: ProtocolVersion | None
) -> None:
    # At 2026-07-28 the question comes as an input request in place of the result, and
    # goes back with the retried call.
    hooks = Hooks(ElicitationAnswer("accept", {"name": "Ada", "age": 36}))
    where = shared if protocol is None else tmp_path
    assert await call(hooks, where, "ask_name", {}, protocol) == "accept:Ada:36"
    [(asked_call, request)] = hooks.asked
    assert asked_call is not None
    assert asked_call.call_id == "call-1"
    assert request.server == "a"
    assert request.mode == "form"
    assert request.message == "What is your name?"
    assert request.requested_schema is not None
    assert set(request.requested_schema["properties"]) == {"name", "age"}


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_form_says_so_to_the_server(
    shared: McpServer, action: str
) -> None:
    hooks = Hooks(ElicitationAnswer(action))  # type: ignore[arg-type]
    assert await call(hooks, shared, "ask_name", {}) == action


async def test_an_owner_without_a_user_declines(shared: McpServer) -> None:
    assert await call(ClientHooks(), shared, "ask_name", {}) == "decline"


async def test_content_that_misses_the_requested_schema_never_reaches_the_server(
    shared: McpServer,
) -> None:
    hooks = Hooks(ElicitationAnswer("accept", {"name": "x" * 41, "age": 36}))
    output = await call(hooks, shared, "ask_name", {})
    assert output.startswith("error:")
    assert "does not match the requested schema" in output
    assert "x" * 41 not in output


async def test_a_url_elicitation_carries_its_url(shared: McpServer) -> None:
    hooks = Hooks(ElicitationAnswer("accept"))
    assert await call(hooks, shared, "open_link", {}) == "accept"
    [(_call, request)] = hooks.asked
    assert request.mode == "url"
    assert request.url == "https://example.com/login"
    assert request.requested_schema is None


async def test_the_roots_are_the_owners_folders_as_file_uris(
    shared: McpServer, tmp_path: Path
) -> None:
    one, two = tmp_path / "one", tmp_path / "two words"
    hooks = Hooks(roots=[str(one), str(two)])
    listed = await call(hooks, shared, "roots", {})
    assert listed.splitlines() == [one.as_uri(), two.as_uri()]
    assert "%20" in two.as_uri()


async def test_a_change_of_roots_is_announced_to_the_server(tmp_path: Path) -> None:
    hooks = Hooks(roots=[str(tmp_path / "before")])
    server = make_server(stdio("a", ASKING), tmp_path)
    server.hooks = hooks
    server.start()
    try:
        await server.wait_ready(WAIT_S)
        waiting = asyncio.create_task(server.call_tool("wait_roots_change", {}, call_context()))
        await asyncio.sleep(0.3)  # the call is on its way; the server waits for the change
        hooks.folders = [str(tmp_path / "after")]
        await server.roots_changed()
        async with asyncio.timeout(WAIT_S):
            listed = await waiting
    finally:
        await server.stop()
    assert listed.splitlines() == [(tmp_path / "after").as_uri()]


async def test_a_flood_of_progress_is_coalesced_and_ends_with_the_last_step(
    shared: McpServer,
) -> None:
    hooks = Hooks()
    assert await call(hooks, shared, "progress", {"count": 2000}) == "done"
    steps = [progress for _id, progress, _total, _message in hooks.progressed]
    assert 1 <= len(steps) < 200  # one per 100 ms at most, not 2,000
    assert steps == sorted(steps)
    assert hooks.progressed[-1] == ("call-1", 2000, 2000, "step 2000")


async def test_log_messages_go_to_the_servers_log_file_cut_to_their_bound(
    tmp_path: Path,
) -> None:
    assert await call(ClientHooks(), tmp_path, "log", {"count": 3, "size": 10_000}) == "logged"

    def lines() -> list[str]:
        text = (tmp_path / "logs" / "a.log").read_text()
        return [line for line in text.splitlines() if line.startswith("[info")]

    await wait_for(lambda: len(lines()) == 3)  # notifications are handled apart from results
    lines = lines()
    assert lines[0].startswith("[info] line 0 xxx")
    assert all(len(line) < 2100 for line in lines)
