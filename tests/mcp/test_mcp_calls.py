"""Listing and calling the tools of a real SDK server over stdio (and one over HTTP)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from cleveragents.mcp import McpServer, McpServerConfig, McpToolError
from cleveragents.tool import CancelToken, ToolActorContext, ToolCallContext
from kit.mcp import http_server, make_server, started, stdio
from kit.paths import PLAIN_SERVER, SDK_SERVER
from kit.wait import WAIT_S

# One loop for the module, so the calls below share one server (each start costs the
# SDK's import time in the server, about half a second); one xdist worker for the module,
# so that server is started once, not once per worker.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("mcp-calls")]

ALL_TOOLS = [
    "add", "echo_text", "picture", "fail", "bad_output", "sleep", "crash", "flood",
    "add_tool", "env",
]  # fmt: skip


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpServer]:
    """One SDK server over stdio for the tests that only call it."""
    async with started(stdio("s", SDK_SERVER), tmp_path_factory.mktemp("shared")) as server:
        assert server.status == "ready", server.error
        yield server


async def test_every_page_of_a_paginated_listing_becomes_a_tool(tmp_path: Path) -> None:
    async with started(stdio("paged", SDK_SERVER, "--page-size", "2"), tmp_path) as server:
        assert server.status == "ready"
        assert [spec.name for spec in server.tool_specs()] == [
            f"mcp:paged/{name}" for name in ALL_TOOLS
        ]
        assert server.skipped == []


async def test_a_spec_carries_the_servers_description_and_input_schema(shared: McpServer) -> None:
    add = next(spec for spec in shared.tool_specs() if spec.name == "mcp:s/add")
    assert add.description == "Add two integers."
    assert add.input_schema["required"] == ["a", "b"]
    assert add.timeout_s is None
    assert add.output_schema is None  # a mismatch must not fail the record
    assert add.metadata["output_schema"]["properties"]["result"]["type"] == "integer"
    assert add.metadata["source"] == "mcp"


async def test_structured_content_is_the_output_of_a_spec_handler(shared: McpServer) -> None:
    add = next(spec for spec in shared.tool_specs() if spec.name == "mcp:s/add")
    # The runner adds sandbox_root to the inputs; it is not the server's to see.
    context = ToolCallContext("c1", "mcp:s/add", 1, {}, ToolActorContext(), CancelToken())
    output = await add.handler({"a": 2, "b": 3, "sandbox_root": "/secret/root"}, context)
    assert output == {"result": 5}


async def test_a_single_text_block_is_the_output_as_a_string(shared: McpServer) -> None:
    assert await shared.call_tool("echo_text", {"text": "hello"}) == "hello"


async def test_several_blocks_come_back_as_wire_content_blocks(shared: McpServer) -> None:
    output = await shared.call_tool("picture", {})
    assert output[0] == {"type": "text", "text": "a red dot"}
    assert output[1]["type"] == "image"
    assert output[1]["mimeType"] == "image/png"  # camelCase, as on the wire
    assert output[1]["data"].startswith("iVBORw0KGgo")


async def test_is_error_raises_with_the_servers_text(shared: McpServer) -> None:
    with pytest.raises(McpToolError) as raised:
        await shared.call_tool("fail", {"message": "the disk is on fire"})
    assert str(raised.value) == "Error executing tool fail: the disk is on fire"  # as sent


async def test_an_unknown_tool_is_a_tool_error_not_a_crash(shared: McpServer) -> None:
    with pytest.raises(McpToolError):
        await shared.call_tool("no_such_tool", {})
    assert shared.status == "ready"


async def test_structured_content_that_misses_its_output_schema_is_still_a_result(
    shared: McpServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="cleveragents.mcp"):
        output = await shared.call_tool("bad_output", {})
    assert output == {"count": "many"}
    assert any("does not match its outputSchema" in r.getMessage() for r in caplog.records)


async def test_two_servers_with_the_same_tool_name_give_distinct_tools(tmp_path: Path) -> None:
    a = make_server(stdio("a", SDK_SERVER), tmp_path)
    b = make_server(stdio("b", SDK_SERVER), tmp_path)
    a.start()
    b.start()
    try:
        await asyncio.gather(a.wait_ready(WAIT_S), b.wait_ready(WAIT_S))
        names_a = {spec.name for spec in a.tool_specs()}
        names_b = {spec.name for spec in b.tool_specs()}
        assert "mcp:a/add" in names_a
        assert "mcp:b/add" in names_b
        assert names_a.isdisjoint(names_b)
        add_b = next(spec for spec in b.tool_specs() if spec.name == "mcp:b/add")
        context = ToolCallContext("c2", "mcp:b/add", 1, {}, ToolActorContext(), CancelToken())
        assert await add_b.handler({"a": 40, "b": 2}, context) == {"result": 42}
    finally:
        await asyncio.gather(a.stop(), b.stop())


async def test_include_and_exclude_filter_the_listing(tmp_path: Path) -> None:
    config = stdio("f", PLAIN_SERVER, include=("e*", "n*"), exclude=("noisy",))
    async with started(config, tmp_path) as server:
        assert [spec.name for spec in server.tool_specs()] == ["mcp:f/echo"]


async def test_read_only_hint_decides_the_kind(shared: McpServer) -> None:
    kinds = {spec.name: spec.kind for spec in shared.tool_specs()}
    assert kinds["mcp:s/add"] == "read"  # readOnlyHint: true
    assert kinds["mcp:s/echo_text"] == "write"  # no annotations
    add = next(spec for spec in shared.tool_specs() if spec.name == "mcp:s/add")
    assert add.annotations.read_only is True


async def test_trust_overrides_the_kind_of_every_tool(tmp_path: Path) -> None:
    async with started(stdio("t", PLAIN_SERVER, trust="execute"), tmp_path) as server:
        assert {spec.kind for spec in server.tool_specs()} == {"execute"}


async def test_the_server_sees_base_env_and_its_entry_env_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLEVERAGENTS_TEST_SECRET", "must not leak")
    config = stdio("e", SDK_SERVER, env={"FROM_ENTRY": "entry"})
    base = {"PATH": "/usr/bin:/bin", "FROM_BASE": "base"}
    async with started(config, tmp_path, base=base) as server:
        assert server.status == "ready", server.error
        seen = {
            name: await server.call_tool("env", {"name": name})
            for name in ("CLEVERAGENTS_TEST_SECRET", "FROM_BASE", "FROM_ENTRY", "HOME", "USER")
        }
    assert seen == {
        "CLEVERAGENTS_TEST_SECRET": "<unset>",
        "FROM_BASE": "base",
        "FROM_ENTRY": "entry",
        "HOME": "<unset>",
        "USER": "<unset>",
    }


async def test_a_server_over_streamable_http_lists_and_calls(tmp_path: Path) -> None:
    async with http_server(tmp_path) as web:
        config = McpServerConfig("web", url=web.url, headers={"X-Token": "secret-value"})
        async with started(config, tmp_path) as server:
            assert server.status == "ready", server.error
            assert server.protocol_version == "2025-11-25"
            assert "mcp:web/add" in {spec.name for spec in server.tool_specs()}
            assert await server.call_tool("add", {"a": 1, "b": 2}) == {"result": 3}
            assert server.stderr_tail() is None
        assert "secret-value" not in repr(config)


async def test_an_http_server_that_went_away_fails_the_next_call_saying_why(
    tmp_path: Path,
) -> None:
    async with (
        http_server(tmp_path) as web,
        started(McpServerConfig("web", url=web.url), tmp_path) as server,
    ):
        assert server.status == "ready", server.error
        await web.stop()
        with pytest.raises(McpToolError) as raised:
            await server.call_tool("add", {"a": 1, "b": 2})
        assert server.status == "failed"
        assert str(raised.value).startswith("MCP server web is down: the connection failed:")
        assert server.error is not None
        assert server.error.startswith("the connection failed: ConnectError")
