"""Timeouts, cancellation and tool-list changes on live servers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from cleveragents.mcp import ClientHooks, McpServer, McpServerConfig, McpToolError, ProtocolVersion
from cleveragents.tool import CancelToken, ToolActorContext, ToolCallContext
from kit.mcp import http_server, started, stdio
from kit.paths import SDK_SERVER
from kit.wait import WAIT_S, wait_for


def call_context() -> ToolCallContext:
    return ToolCallContext("c1", "mcp:x/y", 1, {}, ToolActorContext(), CancelToken())


class Progress(ClientHooks):
    def __init__(self) -> None:
        self.seen: list[float] = []

    def progress(
        self, call: ToolCallContext, progress: float, total: float | None, message: str | None
    ) -> None:
        self.seen.append(progress)


async def test_a_call_that_outlives_its_timeout_fails_saying_so_despite_progress(
    tmp_path: Path,
) -> None:
    # The tool reports progress every 50 ms: that must not extend the 0.5 s bound.
    config = stdio("slow", SDK_SERVER, "--marker-dir", str(tmp_path), timeout_s=0.5)
    async with started(config, tmp_path) as server:
        server.hooks = hooks = Progress()
        began = time.monotonic()
        with pytest.raises(McpToolError) as raised:
            await server.call_tool("sleep", {"seconds": 10}, call_context())
        assert time.monotonic() - began < 3.0
        assert hooks.seen  # its progress arrived (and, coalesced, reached the hooks)
        assert str(raised.value) == "mcp:slow/sleep timed out after 0.5 s"
        # The server got notifications/cancelled for it, and the late answer is ignored.
        await wait_for((tmp_path / "cancelled").exists)
        assert server.status == "ready"
        assert await server.call_tool("echo_text", {"text": "next"}) == "next"


@pytest.mark.parametrize("protocol", [None, "2026-07-28"])
async def test_cancelling_the_awaiting_task_cancels_the_request_on_the_server(
    tmp_path: Path, protocol: ProtocolVersion | None
) -> None:
    config = stdio("c", SDK_SERVER, "--marker-dir", str(tmp_path), protocol=protocol)
    async with started(config, tmp_path) as server:
        call = asyncio.create_task(server.call_tool("sleep", {"seconds": 30}))
        await wait_for(lambda: call.done() or (tmp_path / "started").exists())
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await wait_for((tmp_path / "cancelled").exists)
        assert server.status == "ready"
        assert await server.call_tool("add", {"a": 1, "b": 2}) == {"result": 3}


@pytest.mark.parametrize("protocol", [None, "2026-07-28"])
async def test_list_changed_refreshes_the_tools_and_calls_back(
    tmp_path: Path, protocol: ProtocolVersion | None
) -> None:
    changed = asyncio.Event()
    seen: list[list[str]] = []

    def on_tools_changed(server: McpServer) -> None:
        seen.append([spec.name for spec in server.tool_specs()])
        changed.set()

    config = stdio("lc", SDK_SERVER, protocol=protocol)
    async with started(config, tmp_path, on_tools_changed=on_tools_changed) as server:
        assert server.protocol_version == (protocol or "2025-11-25")
        assert "mcp:lc/late" not in {spec.name for spec in server.tool_specs()}
        assert await server.call_tool("add_tool", {"name": "late"}) == "added"
        async with asyncio.timeout(WAIT_S):
            await changed.wait()
        assert "mcp:lc/late" in seen[-1]
        late = next(spec for spec in server.tool_specs() if spec.name == "mcp:lc/late")
        assert await late.handler({}, call_context()) == {"result": "I am late"}


@pytest.mark.parametrize("protocol", [None, "2026-07-28"])
async def test_cancelling_a_call_over_http_reaches_the_server(
    tmp_path: Path, protocol: ProtocolVersion | None
) -> None:
    async with http_server(tmp_path) as web:
        config = McpServerConfig("web", url=web.url, protocol=protocol)
        async with started(config, tmp_path) as server:
            assert server.status == "ready", server.error
            call = asyncio.create_task(server.call_tool("sleep", {"seconds": 30}))
            await wait_for(lambda: call.done() or (tmp_path / "started").exists())
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await wait_for((tmp_path / "cancelled").exists)
            assert await server.call_tool("add", {"a": 1, "b": 2}) == {"result": 3}


@pytest.mark.parametrize("protocol", [None, "2026-07-28"])
async def test_list_changed_over_http_refreshes_the_tools(
    tmp_path: Path, protocol: ProtocolVersion | None
) -> None:
    changed = asyncio.Event()
    async with (
        http_server(tmp_path) as web,
        started(
            McpServerConfig("web", url=web.url, protocol=protocol),
            tmp_path,
            on_tools_changed=lambda _server: changed.set(),
        ) as server,
    ):
        assert server.status == "ready", server.error
        assert await server.call_tool("add_tool", {"name": "later"}) == "added"
        async with asyncio.timeout(WAIT_S):
            await changed.wait()
        assert "mcp:web/later" in {spec.name for spec in server.tool_specs()}
