"""Protocol versions: detected without a probe delay, remembered, or forced.

The hand-written server speaks exactly one era and records what it receives, so these
tests see which requests the client sent, and when relative to the server's own start.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cleveragents.mcp import McpToolError
from kit.mcp import started, stdio
from kit.paths import PLAIN_SERVER

CONNECT_BOUND_S = 1.0
"""Ready within 1 s of the server's own start (the SDK's auto mode would take 10 s on a
server that ignores server/discover): a correctness bound, not a benchmark."""


def record_of(path: Path) -> tuple[float, list[str]]:
    """The server's start time and the methods it received, in order."""
    lines = path.read_text().splitlines()
    starts = [float(line.split()[1]) for line in lines if line.startswith("started ")]
    return starts[-1], [line for line in lines if not line.startswith("started ")]


async def test_a_handshake_only_server_is_connected_without_probing_discover(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record"
    async with started(stdio("old", PLAIN_SERVER, "--record", str(record)), tmp_path) as server:
        ready_at = time.time()
        assert server.status == "ready", server.error
        assert server.protocol_version == "2025-11-25"
        assert await server.call_tool("echo", {"text": "hi"}) == "hi"
    server_start, methods = record_of(record)
    assert ready_at - server_start < CONNECT_BOUND_S
    assert methods == ["initialize", "notifications/initialized", "tools/list", "tools/call"]


@pytest.mark.parametrize("refusal", ["-32601", "-32022"])
async def test_a_server_that_refuses_initialize_is_connected_as_2026_07_28(
    tmp_path: Path, refusal: str
) -> None:
    record = tmp_path / "record"
    config = stdio(
        "new", PLAIN_SERVER, "--era", "modern", "--refuse-code", refusal, "--record", str(record)
    )
    async with started(config, tmp_path) as server:
        ready_at = time.time()
        assert server.status == "ready", server.error
        assert server.protocol_version == "2026-07-28"
        assert await server.call_tool("echo", {"text": "hi"}) == "hi"
    server_start, methods = record_of(record)
    assert ready_at - server_start < CONNECT_BOUND_S
    assert methods == ["initialize", "server/discover", "tools/list", "tools/call"]


async def test_the_detected_version_is_used_first_after_a_restart(tmp_path: Path) -> None:
    record = tmp_path / "record"
    config = stdio("new", PLAIN_SERVER, "--era", "modern", "--record", str(record))
    async with started(config, tmp_path) as server:
        with pytest.raises(McpToolError):
            await server.call_tool("crash", {})
        assert await server.call_tool("echo", {"text": "back"}) == "back"
        assert server.protocol_version == "2026-07-28"
    _, methods = record_of(record)
    assert methods == [
        "initialize", "server/discover", "tools/list", "tools/call",  # first run: detected
        "server/discover", "tools/list", "tools/call",  # the restart: no initialize
    ]  # fmt: skip


async def test_a_forced_version_is_not_fallen_back_from(tmp_path: Path) -> None:
    config = stdio("new", PLAIN_SERVER, "--era", "modern", protocol="2025-11-25")
    async with started(config, tmp_path) as server:
        assert server.status == "failed"
        assert server.error == "connecting failed: initialize is not supported (code -32601)"


async def test_forcing_2026_07_28_sends_no_initialize(tmp_path: Path) -> None:
    record = tmp_path / "record"
    config = stdio(
        "old", PLAIN_SERVER, "--record", str(record), protocol="2026-07-28", startup_timeout_s=0.5
    )
    async with started(config, tmp_path) as server:
        # The handshake-only server never answers server/discover.
        assert server.status == "failed"
        assert server.error == "the server was not ready within 0.5 s (still connecting)"
    _, methods = record_of(record)
    assert methods == ["server/discover"]
