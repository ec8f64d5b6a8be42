"""A stdio MCP server's descendants end with it, ``setsid`` ones too: when it is stopped,
when it exits by itself, when the daemon exits, and when the daemon is killed outright.
A process group cannot do this (a ``setsid`` child leaves it): the server runs behind a
child subreaper, which adopts every orphan of its tree."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cleveragents.mcp import McpServerConfig, McpToolError
from kit.mcp import started
from kit.paths import PLAIN_SERVER
from kit.processes import kill_all, processes_with, still_running
from kit.rawpeer import RawDaemon
from kit.wait import WAIT_S, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


@pytest.fixture
def marker() -> Iterator[str]:
    """A word in the escaping grandchild's command line; anything left is killed after."""
    word = f"cleveragents-escapee-{uuid.uuid4().hex}"
    yield word
    kill_all(processes_with(word))


SLEEPER = "import os, time; os.setsid(); time.sleep(120)"


def escaping_server(marker: str) -> tuple[str, list[str]]:
    """The plain test server, after it left a grandchild in a session of its own whose
    parent has exited: an orphan that no process group of the server holds."""
    script = f"({sys.executable} -c '{SLEEPER}' {marker} &); exec {sys.executable} {PLAIN_SERVER}"
    return "/bin/sh", ["-c", script]


def escapees(marker: str) -> list[int]:
    """The grandchild itself (the shell's and the reaper's command lines hold the marker
    too)."""
    found = []
    for pid in processes_with(marker):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:4] == [b"-c", SLEEPER.encode(), marker.encode()]:
            found.append(pid)
    return found


def config(marker: str) -> McpServerConfig:
    command, args = escaping_server(marker)
    return McpServerConfig("tree", command=command, args=tuple(args), startup_timeout_s=WAIT_S)


async def test_a_setsid_grandchild_ends_when_the_server_is_stopped(
    tmp_path: Path, marker: str
) -> None:
    async with started(config(marker), tmp_path) as server:
        assert server.status == "ready", server.error
        await wait_for(lambda: bool(escapees(marker)))
        left = processes_with(marker)
    assert still_running(left, timeout=WAIT_S) == []


async def test_a_setsid_grandchild_ends_when_the_server_exits_by_itself(
    tmp_path: Path, marker: str
) -> None:
    async with started(config(marker), tmp_path) as server:
        await wait_for(lambda: bool(escapees(marker)))
        grandchild = escapees(marker)
        with pytest.raises(McpToolError):
            await server.call_tool("crash", {})
        # Still inside: the daemon has not stopped anything; the server's own end did.
        assert still_running(grandchild, timeout=WAIT_S) == []


@pytest.mark.parametrize("how", ["exit", "SIGKILL"])
async def test_a_setsid_grandchild_ends_when_the_daemon_ends(
    tmp_path: Path, marker: str, how: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command, args = escaping_server(marker)
    entry = {"name": "tree", "command": command, "args": args}
    daemon = await RawDaemon.spawn(tmp_path / "state")
    try:
        daemon.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
            "initializationOptions": {"mcpServers": [entry]}}})  # fmt: skip
        assert "result" in await daemon.reply_to(1, timeout=2 * WAIT_S)
        await wait_for(lambda: bool(escapees(marker)))
        left = processes_with(marker)
        if how == "exit":
            daemon.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
            await daemon.reply_to(2, timeout=2 * WAIT_S)
            daemon.send({"jsonrpc": "2.0", "method": "exit"})
            assert await daemon.wait_exit(WAIT_S) == 0
        else:
            await daemon.kill()  # no clean-up of its own: the reaper sees its parent die
        assert still_running(left, timeout=WAIT_S) == []
    finally:
        await daemon.kill()
