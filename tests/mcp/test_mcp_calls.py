"""Listing and calling the tools of a real SDK server over stdio (and one over HTTP)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp_kit import SDK_SERVER, http_server, started, stdio

from cleveragents.mcp import McpServerConfig, McpToolError

ALL_TOOLS = [
    "add", "echo_text", "picture", "fail", "bad_output", "sleep", "crash", "flood",
    "add_tool", "env",
]  # fmt: skip


async def test_every_page_of_a_paginated_listing_becomes_a_tool(tmp_path: Path) -> None:
    async with started(stdio("paged", SDK_SERVER, "--page-size", "2"), tmp_path) as server:
        assert server.status == "ready"
        assert [spec.name for spec in server.tool_specs()] == [
            f"mcp:paged/{name}" for name in ALL_TOOLS
        ]
        assert server.skipped == []


async def test_a_spec_carries_the_servers_description_and_input_schema(tmp_path: Path) -> None:
    async with started(stdio("s", SDK_SERVER), tmp_path) as server:
        add = next(spec for spec in server.tool_specs() if spec.name == "mcp:s/add")
        assert add.description == "Add two integers."
        assert add.input_schema["required"] == ["a", "b"]
        assert add.timeout_s is None
        assert add.output_schema is None  # a mismatch must not fail the record
        assert add.metadata["output_schema"]["properties"]["result"]["type"] == "integer"
        assert add.metadata["source"] == "mcp"


async def test_structured_content_is_the_output_and_reserved_inputs_are_not_sent(
    tmp_path: Path,
) -> None:
    async with started(stdio("s", SDK_SERVER), tmp_path) as server:
        add = next(spec for spec in server.tool_specs() if spec.name == "mcp:s/add")
        # The runner adds sandbox_root; the server's schema would refuse an extra key
        # only if it were strict, so check the answer is right either way.
        output = await add.handler({"a": 2, "b": 3, "sandbox_root": "/secret/root"})
        assert output == {"result": 5}


async def test_a_single_text_block_is_the_output_as_a_string(tmp_path: Path) -> None:
    async with started(stdio("s", SDK_SERVER), tmp_path) as server:
        assert await server.call_tool("echo_text", {"text": "hello"}) == "hello"


async def test_several_blocks_come_back_as_wire_content_blocks(tmp_path: Path) -> None:
    async with started(stdio("s", SDK_SERVER), tmp_path) as server:
        output = await server.call_tool("picture", {})
    assert output[0] == {"type": "text", "text": "a red dot"}
    assert output[1]["type"] == "image"
    assert output[1]["mimeType"] == "image/png"  # camelCase, as on the wire
    assert output[1]["data"].startswith("iVBORw0KGgo")


async def test_is_error_raises_with_the_servers_text(tmp_path: Path) -> None:
    async with started(stdio("s", SDK_SERVER), tmp_path) as server:
        with pytest.raises(McpToolError) as raised:
            await server.call_tool("fail", {"message": "the disk is on fire"})
    assert str(raised.value) == "Error executing tool fail: the disk is on fire"  # as sent


async def test_an_unknown_tool_is_a_tool_error_not_a_crash(tmp_path: Path) -> None:
    async with started(stdio("s", SDK_SERVER), tmp_path) as server:
        with pytest.raises(McpToolError):
            await server.call_tool("no_such_tool", {})
        assert server.status == "ready"


async def test_structured_content_that_misses_its_output_schema_is_still_a_result(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with started(stdio("s", SDK_SERVER), tmp_path) as server:
        with caplog.at_level(logging.WARNING, logger="cleveragents.mcp"):
            output = await server.call_tool("bad_output", {})
    assert output == {"count": "many"}
    assert any("does not match its outputSchema" in r.getMessage() for r in caplog.records)


async def test_two_servers_with_the_same_tool_name_give_distinct_tools(tmp_path: Path) -> None:
    async with (
        started(stdio("a", SDK_SERVER), tmp_path) as a,
        started(stdio("b", SDK_SERVER), tmp_path) as b,
    ):
        names_a = {spec.name for spec in a.tool_specs()}
        names_b = {spec.name for spec in b.tool_specs()}
        assert "mcp:a/add" in names_a
        assert "mcp:b/add" in names_b
        assert names_a.isdisjoint(names_b)
        add_b = next(spec for spec in b.tool_specs() if spec.name == "mcp:b/add")
        assert await add_b.handler({"a": 40, "b": 2}) == {"result": 42}


async def test_include_and_exclude_filter_the_listing(tmp_path: Path) -> None:
    config = stdio("f", SDK_SERVER, include=("a*", "e*", "picture"), exclude=("env",))
    async with started(config, tmp_path) as server:
        assert [spec.name for spec in server.tool_specs()] == [
            "mcp:f/add", "mcp:f/echo_text", "mcp:f/picture", "mcp:f/add_tool",
        ]  # fmt: skip


async def test_read_only_hint_and_trust_decide_the_kind(tmp_path: Path) -> None:
    async with started(stdio("k", SDK_SERVER), tmp_path) as server:
        kinds = {spec.name: spec.kind for spec in server.tool_specs()}
    assert kinds["mcp:k/add"] == "read"
    assert kinds["mcp:k/echo_text"] == "write"
    async with started(stdio("t", SDK_SERVER, trust="execute"), tmp_path) as server:
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
    async with http_server(tmp_path) as url:
        config = McpServerConfig("web", url=url, headers={"X-Token": "secret-value"})
        async with started(config, tmp_path) as server:
            assert server.status == "ready", server.error
            assert server.protocol_version == "2025-11-25"
            assert "mcp:web/add" in {spec.name for spec in server.tool_specs()}
            assert await server.call_tool("add", {"a": 1, "b": 2}) == {"result": 3}
            assert server.stderr_tail() is None
        assert "secret-value" not in repr(config)
