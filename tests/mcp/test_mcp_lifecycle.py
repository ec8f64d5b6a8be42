"""Starting, failing, dying, restarting and stopping real servers."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

import cleveragents.mcp._sdk as sdk
from cleveragents.mcp import RESTARTS_PER_MINUTE, SDK_MISSING, McpServerConfig, McpToolError
from kit.mcp import make_server, process_alive, started, stdio
from kit.paths import PLAIN_SERVER, SDK_SERVER
from kit.wait import WAIT_S, wait_for


def python(name: str, code: str, **fields: object) -> McpServerConfig:
    return McpServerConfig(name, command=sys.executable, args=("-c", code), **fields)  # type: ignore[arg-type]


async def test_a_server_that_exits_at_start_is_failed_with_its_stderr_tail(tmp_path: Path) -> None:
    code = "import sys\nfor i in range(30): print(f'complaint {i}', file=sys.stderr)\nsys.exit(4)"
    async with started(python("broken", code), tmp_path) as server:
        assert server.status == "failed"
        assert server.error == "the server exited with code 4 before it was ready"
        tail = server.stderr_tail()
        assert tail is not None
        assert tail.splitlines() == [f"complaint {i}" for i in range(10, 30)]
        assert server.tool_specs() == []


async def test_a_command_that_does_not_exist_is_failed_saying_so(tmp_path: Path) -> None:
    config = McpServerConfig("missing", command="cleveragents-no-such-command-xyz")
    async with started(config, tmp_path) as server:
        assert server.status == "failed"
        assert server.error is not None
        assert server.error.startswith("cannot start 'cleveragents-no-such-command-xyz'")
        assert server.stderr_tail() is None


async def test_a_server_that_never_answers_fails_at_its_startup_timeout_and_is_killed(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)"
    started_at = time.monotonic()
    async with started(python("mute", code, startup_timeout_s=0.5), tmp_path) as server:
        elapsed = time.monotonic() - started_at
        assert server.status == "failed"
        assert server.error == "the server was not ready within 0.5 s (still connecting)"
        assert elapsed < 5.0
        pid = int(pid_file.read_text())
    assert not process_alive(pid)


async def test_stop_is_idempotent_and_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    # The server leaves a grandchild in its process group; stop must take it too.
    code = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        f"sys.argv = [{str(SDK_SERVER)!r}]\n"
        f"exec(open({str(SDK_SERVER)!r}).read())\n"
    )
    server = make_server(python("group", code), tmp_path)
    server.start()
    await server.wait_ready(WAIT_S)
    assert server.status == "ready", server.error
    grandchild = int(pid_file.read_text())
    assert process_alive(grandchild)
    await server.stop()
    await server.stop()
    assert server.status == "stopped"
    assert server.tool_specs() == []
    await wait_for(lambda: not process_alive(grandchild))


async def test_a_crash_mid_call_fails_the_call_and_the_next_call_restarts_it(
    tmp_path: Path,
) -> None:
    async with started(stdio("c", SDK_SERVER), tmp_path) as server:
        with pytest.raises(McpToolError) as raised:
            await server.call_tool("crash", {"code": 3})
        assert server.status == "failed"
        assert server.error == "the server exited with code 3"
        assert str(raised.value) == (
            "MCP server c is down: the server exited with code 3\n"
            "last lines of its stderr:\nabout to crash on purpose"
        )
        assert server.tool_specs() != []  # still offered: a call brings it back
        assert await server.call_tool("add", {"a": 1, "b": 1}) == {"result": 2}
        assert server.status == "ready"
        assert server.error is None


async def test_after_three_restarts_in_a_minute_calls_fail_at_once(tmp_path: Path) -> None:
    async with started(stdio("p", PLAIN_SERVER), tmp_path) as server:
        for _ in range(RESTARTS_PER_MINUTE + 1):  # the first run, then each restart
            with pytest.raises(McpToolError):
                await server.call_tool("crash", {})
        began = time.monotonic()
        with pytest.raises(McpToolError) as raised:
            await server.call_tool("echo", {"text": "x"})
        assert time.monotonic() - began < 1.0
        assert "restart budget is spent (3 restarts in the last minute)" in str(raised.value)
        assert server.status == "failed"


async def test_a_server_that_dies_while_idle_is_failed_at_once(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = (
        "import os, sys\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        f"sys.argv = [{str(SDK_SERVER)!r}]\n"
        f"exec(open({str(SDK_SERVER)!r}).read())\n"
    )
    async with started(python("idle", code), tmp_path) as server:
        assert server.status == "ready", server.error
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        await wait_for(lambda: server.status == "failed")
        assert server.error == "the server was killed by SIGKILL"


async def test_without_the_sdk_a_server_fails_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if it were not installed
    assert sdk.mcp_available() is False
    async with started(stdio("nosdk", SDK_SERVER), tmp_path) as server:
        assert server.status == "failed"
        assert server.error == SDK_MISSING
    assert SDK_MISSING == "the MCP SDK is not installed: pip install 'cleveragents[mcp]'"


async def test_a_stderr_flood_does_not_block_calls(tmp_path: Path) -> None:
    async with started(stdio("loud", SDK_SERVER), tmp_path) as server:
        assert await server.call_tool("flood", {"megabytes": 20}) == "flooded"
        assert await server.call_tool("echo_text", {"text": "still fine"}) == "still fine"
        tail = server.stderr_tail()
        assert tail is not None
        assert len(tail.encode()) <= 4096
        assert set(tail.replace("\n", "")) == {"x"}
    assert (tmp_path / "logs" / "loud.log").stat().st_size > 20 * 1024 * 1024


async def test_lines_on_stdout_that_are_not_json_rpc_are_skipped(tmp_path: Path) -> None:
    async with started(stdio("noisy", SDK_SERVER, "--banner"), tmp_path) as server:
        assert await server.call_tool("add", {"a": 2, "b": 2}) == {"result": 4}
        assert server.status == "ready"
        tail = server.stderr_tail()
    assert tail is not None
    assert tail.splitlines() == [
        "[cleveragents] skipped a stdout line (not JSON-RPC): "
        "test-server 1.0 starting, this line is not JSON-RPC",
        '[cleveragents] skipped a stdout line (not JSON-RPC): {"json": "but not JSON-RPC"}',
    ]


async def test_a_hand_written_server_with_garbage_and_blank_lines_still_answers(
    tmp_path: Path,
) -> None:
    async with started(stdio("plain", PLAIN_SERVER), tmp_path) as server:
        assert await server.call_tool("noisy", {}) == "still here"
        assert await server.call_tool("echo", {"text": "ok"}) == "ok"


async def test_stop_while_starting_ends_the_attempt_and_its_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)"
    server = make_server(python("slow", code), tmp_path)
    server.start()
    await wait_for(pid_file.exists)
    began = time.monotonic()
    await server.stop()
    assert time.monotonic() - began < 5.0
    assert server.status == "stopped"
    assert server.error is None
    await server.wait_ready()  # returns at once: not starting
    await wait_for(lambda: not process_alive(int(pid_file.read_text())))


async def test_calls_that_find_the_server_dead_share_one_restart(tmp_path: Path) -> None:
    record = tmp_path / "record"
    async with started(stdio("p", PLAIN_SERVER, "--record", str(record)), tmp_path) as server:
        with pytest.raises(McpToolError):
            await server.call_tool("crash", {})
        answers = await asyncio.gather(
            *(server.call_tool("echo", {"text": str(i)}) for i in range(3))
        )
        assert answers == ["0", "1", "2"]
    assert record.read_text().count("started ") == 2


@pytest.mark.parametrize(("cwd", "where"), [(None, "."), ("sub", "sub"), ("/", "/")])
async def test_a_stdio_server_runs_in_the_sandbox_root_unless_its_entry_says(
    tmp_path: Path, cwd: str | None, where: str
) -> None:
    (tmp_path / "sub").mkdir()
    out = tmp_path / "cwd.txt"
    code = f"import os\nopen({str(out)!r}, 'w').write(os.getcwd())"
    async with started(python("where", code, cwd=cwd), tmp_path) as server:
        assert server.status == "failed"  # it exits without speaking MCP
    assert Path(out.read_text()) == (tmp_path / where).resolve()
