"""An MCP server that attacks its client (issue 25, items 1 and 2): a catastrophic
pattern in an ``outputSchema`` or an ``inputSchema``, a ``$ref`` bomb, a flood of
``tools/list_changed`` with new schemas each time, and an HTTP answer too large to hold.
Each runs against a real server process while a watch checks that the event loop was
never frozen; on the code before these fixes each froze it for hours, or let memory grow
without bound."""

from __future__ import annotations

import gc
import logging
import weakref
from pathlib import Path

import pytest

from cleveragents.mcp import McpToolError
from cleveragents.tool import ToolCall, ToolInputError, ToolRegistry, ToolRunner, _spec
from kit.hostile import CATASTROPHIC_VALUE
from kit.hostile_mcp import HOSTILE_SERVER, LoopWatch, hostile_http_server
from kit.mcp import started, stdio
from kit.wait import wait_for


async def test_a_catastrophic_output_pattern_is_checked_at_once_and_only_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cleveragents.mcp")
    async with started(stdio("h", HOSTILE_SERVER), tmp_path) as server, LoopWatch() as watch:
        assert server.status == "ready", server.error
        output = await server.call_tool("catastrophic", {})
    assert output == {"s": CATASTROPHIC_VALUE}  # a mismatch is logged, the answer used
    assert "does not match its outputSchema" in caplog.text
    assert "must match pattern" in caplog.text
    watch.assert_never_frozen()


async def test_a_catastrophic_input_pattern_refuses_the_models_argument_at_once(
    tmp_path: Path,
) -> None:
    async with started(stdio("h", HOSTILE_SERVER), tmp_path) as server, LoopWatch() as watch:
        registry = ToolRegistry()
        for spec in server.tool_specs():
            registry.register(spec)
        runner = ToolRunner(registry)
        hostile = ToolCall("c1", "mcp:h/lookup", {"q": CATASTROPHIC_VALUE})
        refused = await runner.arun(hostile)
        fine = await runner.arun(ToolCall("c2", "mcp:h/lookup", {"q": "aaaa"}))
    assert refused.success is False
    assert refused.error_code == ToolInputError.code
    assert "arguments.q must match pattern ^(a+)+$" in (refused.error or "")
    assert fine.success is True, fine.error
    assert fine.output == "found aaaa"
    watch.assert_never_frozen()


async def test_a_ref_bomb_output_schema_leaves_the_answers_unchecked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "cleveragents.mcp")
    async with started(stdio("h", HOSTILE_SERVER), tmp_path) as server, LoopWatch() as watch:
        assert server.status == "ready", server.error
        assert await server.call_tool("bomb", {}) == {"x": 1}
    assert "answers of bomb: its outputSchema is not usable" in caplog.text
    assert "expands to more than 100,000 subschemas" in caplog.text
    watch.assert_never_frozen()


async def test_a_list_changed_flood_fails_the_server_and_its_validators_stay_bounded(
    tmp_path: Path,
) -> None:
    from cleveragents.mcp import _listing

    listings: list[int] = []
    async with (
        started(stdio("h", HOSTILE_SERVER), tmp_path,
                on_tools_changed=lambda s: listings.append(len(s.tool_specs()))) as server,
        LoopWatch() as watch,
    ):  # fmt: skip
        cached_before = len(_spec._validators)
        with pytest.raises(McpToolError):  # the connection is dropped under the call
            await server.call_tool("flood", {"count": 5000, "interval": 0.005})
        await wait_for(lambda: server.status == "failed")
        assert server.error is not None
        assert "tools/list_changed" in server.error
        assert f"more than {_listing.LIST_CHANGES_PER_MINUTE} times in a minute" in server.error
    # Coalesced and rate-limited: thousands of announcements made at most one listing per change
    # counted, each compiling one new schema, before the server was cut off.
    assert 1 <= len(listings) <= _listing.LIST_CHANGES_PER_MINUTE
    assert len(_spec._validators) - cached_before <= 2 * (_listing.LIST_CHANGES_PER_MINUTE + 8)
    assert len(_spec._validators) <= _spec.MAX_CACHED_VALIDATORS
    watch.assert_never_frozen()


async def test_stopping_a_server_gives_its_validators_back(tmp_path: Path) -> None:
    async with started(stdio("h", HOSTILE_SERVER), tmp_path) as server:
        validators = [weakref.ref(spec._validate_input) for spec in server.tool_specs()]
        assert validators
        keys = {ref().key for ref in validators if ref() is not None}  # type: ignore[union-attr]
    # stopped: the cache no longer holds them, and nothing else does
    assert not keys & {v.key for v in _spec._validators._entries.values()}
    gc.collect()
    assert [ref for ref in validators if ref() is not None] == []


async def test_an_http_answer_over_the_cap_fails_the_call_and_drops_the_connection(
    tmp_path: Path,
) -> None:
    from cleveragents.mcp import McpServerConfig
    from cleveragents.mcp._transport import MAX_HTTP_ANSWER_BYTES

    megabytes = MAX_HTTP_ANSWER_BYTES // (1024 * 1024) + 4
    async with hostile_http_server() as remote:
        config = McpServerConfig("web", url=remote.url, startup_timeout_s=15.0)
        async with started(config, tmp_path) as server, LoopWatch() as watch:
            assert server.status == "ready", server.error
            with pytest.raises(McpToolError) as caught:
                await server.call_tool("huge", {"megabytes": megabytes})
            assert "went past 16 MiB, the most one HTTP answer may hold" in str(caught.value)
            assert "the connection was dropped" in str(caught.value)
            await wait_for(lambda: server.status == "failed")
            assert "went past 16 MiB" in (server.error or "")
            # The next call starts a new connection; an answer under the cap is whole.
            text = await server.call_tool("huge", {"megabytes": 1})
    assert text == "x" * (1024 * 1024)
    watch.assert_never_frozen()
