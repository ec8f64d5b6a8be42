"""A stdio server's log under the state dir is opened as every state file is (issue 25,
item 3): a link planted at ``mcp/NAME.log`` or at ``mcp`` itself is never written
through, and a FIFO there never blocks the loop that starts the server. The server still
starts; only its stderr goes nowhere."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from cleveragents.mcp._logfile import ServerLog
from kit.hostile import finishes
from kit.mcp import started, stdio
from kit.paths import SDK_SERVER
from kit.wait import WAIT_S


def test_a_link_at_the_log_name_is_never_appended_through(tmp_path: Path) -> None:
    outside = tmp_path / "bashrc"
    outside.write_text("untouched\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "s.log").symlink_to(outside)
    log = ServerLog(tmp_path / "logs" / "s.log")
    assert log.open_for_child("s") is None
    log.note("the model's text")
    assert log.tail() is None
    assert outside.read_text() == "untouched\n"


def test_a_link_at_the_log_folder_is_never_entered(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "mcp").symlink_to(elsewhere)
    log = ServerLog(tmp_path / "state" / "mcp" / "s.log")
    assert log.open_for_child("s") is None
    log.note("the model's text")
    assert list(elsewhere.iterdir()) == []


def test_a_fifo_at_the_log_name_is_skipped_at_once(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    os.mkfifo(tmp_path / "logs" / "s.log")
    log = ServerLog(tmp_path / "logs" / "s.log")
    assert finishes(lambda: log.open_for_child("s"), bound=5) is None
    finishes(lambda: log.note("line"), bound=5)
    assert finishes(log.tail, bound=5) is None


def test_a_new_log_is_0600_in_a_0700_folder(tmp_path: Path) -> None:
    log = ServerLog(tmp_path / "logs" / "s.log")
    file = log.open_for_child("s")
    assert file is not None
    file.close()
    assert (tmp_path / "logs").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "logs" / "s.log").stat().st_mode & 0o777 == 0o600


async def test_a_server_whose_log_is_a_fifo_starts_and_answers(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    os.mkfifo(tmp_path / "logs" / "fifo.log")
    async with asyncio.timeout(WAIT_S):
        async with started(stdio("fifo", SDK_SERVER), tmp_path) as server:
            assert server.status == "ready", server.error
            assert await server.call_tool("echo_text", {"text": "hi"}) == "hi"
            assert server.stderr_tail() is None
