"""builtin/shell: confinement (bwrap), the unconfined fallback, timeouts, caps, env."""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workspace_kit import CANARY_TEXT, SHELL_TIMEOUT_MS, Sandbox, require_bwrap, shell_tool

from cleveragents.tool import RESERVED_INPUT_KEYS
from cleveragents.workspace import (
    BWRAP_ENV,
    PinnedRoot,
    ShellTool,
    WorkspaceLimits,
    WorkspaceToolError,
    shell,
)
from kit.processes import processes_with, still_running

BOUND_S = 30.0


async def run(tool: ShellTool, sandbox: Sandbox, command: str, **extra: Any) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "command": command,
        "sandbox_root": str(sandbox.root),
        "resource_bindings": {},
    }
    inputs.setdefault("timeout_ms", SHELL_TIMEOUT_MS)
    inputs.update(extra)
    spec = tool.spec()
    spec.validate_input({k: v for k, v in inputs.items() if k not in RESERVED_INPUT_KEYS})
    result: dict[str, Any] = await asyncio.wait_for(tool(inputs), BOUND_S)
    spec.validate_output(result)
    return result


def exists(path: str) -> bool:
    return os.path.exists(path)


async def read_fifo(path: Path) -> bytes:
    """Wait (bounded, without a thread) until a writer puts a line into the FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, readable.set_result, None)
    try:
        await asyncio.wait_for(readable, BOUND_S)
        return os.read(fd, 100)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


# --------------------------------------------------------------------------- both modes


async def test_the_command_runs_in_the_sandbox_root(sandbox: Sandbox, shell_mode: str) -> None:
    result = await run(shell_tool(shell_mode, sandbox), sandbox, "pwd; cat inside.txt")
    assert result["stdout"] == f"{sandbox.root}\ninside\n"
    assert result["exit_code"] == 0


async def test_exit_code_and_stderr_are_reported(sandbox: Sandbox, shell_mode: str) -> None:
    result = await run(shell_tool(shell_mode, sandbox), sandbox, "echo oops >&2; exit 3")
    assert (result["stderr"], result["exit_code"]) == ("oops\n", 3)


async def test_a_command_killed_by_a_signal_reports_128_plus_the_signal(
    sandbox: Sandbox, shell_mode: str
) -> None:
    result = await run(shell_tool(shell_mode, sandbox), sandbox, "kill -9 $$")
    assert result["exit_code"] == 137


async def test_stdin_is_empty(sandbox: Sandbox, shell_mode: str) -> None:
    result = await run(shell_tool(shell_mode, sandbox), sandbox, "cat; echo done")
    assert result["stdout"] == "done\n"


async def test_output_over_the_cap_keeps_head_and_tail(sandbox: Sandbox, shell_mode: str) -> None:
    tool = shell_tool(shell_mode, sandbox, WorkspaceLimits(max_shell_output_bytes=1000))
    result = await run(tool, sandbox, "seq 1 20000")
    assert result["truncated"] is True
    assert result["stdout"].startswith("1\n2\n3\n")
    assert result["stdout"].endswith("19999\n20000\n")
    assert "bytes omitted" in result["stdout"]
    assert len(result["stdout"]) < 1100
    assert "cut in the middle" in result["note"]


async def test_the_timeout_kills_the_whole_process_group(sandbox: Sandbox, shell_mode: str) -> None:
    marker = f"37.{os.getpid()}{len(shell_mode)}"
    tool = shell_tool(shell_mode, sandbox)
    with pytest.raises(WorkspaceToolError, match="timed out after 300 ms") as info:
        await run(tool, sandbox, f"echo begun; sleep {marker} & sleep {marker}", timeout_ms=300)
    assert "begun" in info.value.message
    assert still_running(processes_with(f"sleep {marker}")) == []


async def test_cancelling_the_call_kills_the_command(sandbox: Sandbox, shell_mode: str) -> None:
    marker = f"41.{os.getpid()}{len(shell_mode)}"
    os.mkfifo(sandbox.root / "ready.fifo")
    tool = shell_tool(shell_mode, sandbox)
    task = asyncio.ensure_future(run(tool, sandbox, f"echo ready > ready.fifo; sleep {marker}"))

    assert await read_fifo(sandbox.root / "ready.fifo") == b"ready\n"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert still_running(processes_with(f"sleep {marker}")) == []


LEAKY_VARIABLES = {
    "MY_LLM_PAT": "pat-should-not-leak-1",  # any name a model spec's apiKeyEnv may give
    "OPENAI_API_KEY": "sk-should-not-leak-2",
    "HTTPS_PROXY": "http://user:should-not-leak-3@proxy.invalid:3128",
    "DATABASE_URL": "postgres://app:should-not-leak-4@db.invalid/app",
    "MYSQL_PWD": "should-not-leak-5",
    "GITHUB_PAT": "should-not-leak-6",
    "SENTRY_DSN": "https://should-not-leak-7@sentry.invalid/1",
    "CLEVERAGENTS_VISIBLE": "should-not-leak-8",
}
SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}  # set by /bin/sh itself


def env_of(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


async def test_the_environment_is_the_allow_list_and_nothing_else(
    sandbox: Sandbox, shell_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in LEAKY_VARIABLES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_TIME", "C")
    result = await run(shell_tool(shell_mode, sandbox), sandbox, "env")
    env = env_of(result["stdout"])
    assert "should-not-leak" not in result["stdout"]
    assert set(env) - SHELL_OWN <= {"PATH", "HOME", "LANG", "TERM", "TZ"} | {
        n for n in env if n.startswith("LC_")
    }
    assert env["HOME"] == str(sandbox.root)
    assert env["LC_TIME"] == "C"
    assert env["PATH"]


async def test_names_in_the_pass_through_list_reach_the_command(
    sandbox: Sandbox, shell_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in LEAKY_VARIABLES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    tool = shell_tool(shell_mode, sandbox)
    tool.set_pass_env(["DATABASE_URL", "NOT_SET_ANYWHERE", "HOME"])
    env = env_of((await run(tool, sandbox, "env"))["stdout"])
    assert env["DATABASE_URL"] == LEAKY_VARIABLES["DATABASE_URL"]
    assert "NOT_SET_ANYWHERE" not in env
    assert env["HOME"] == str(sandbox.root)  # HOME stays the sandbox root
    assert not {"MY_LLM_PAT", "HTTPS_PROXY", "MYSQL_PWD"} & env.keys()


@pytest.mark.parametrize("names", [["A=B"], ["LC_*"], ["X\0Y"], [""], "PATH"])
def test_a_pass_through_entry_that_is_not_a_variable_name_is_refused(names: Any) -> None:
    with pytest.raises(ValueError, match="name"):
        ShellTool(bwrap=None).set_pass_env(names)
    with pytest.raises(ValueError, match="name"):
        ShellTool(bwrap=None, pass_env=names)


@pytest.mark.parametrize("redirect", ["", " > /dev/null 2>&1"])
async def test_a_background_job_does_not_outlive_a_command_that_exits(
    sandbox: Sandbox, shell_mode: str, redirect: str
) -> None:
    # Holding stdout open (no redirect), the job used to keep the call waiting until the
    # timeout; with its output redirected, it used to survive the call.
    marker = f"53.{os.getpid()}{len(shell_mode)}{len(redirect)}"
    tool = shell_tool(shell_mode, sandbox)
    result = await run(tool, sandbox, f"sleep {marker}{redirect} & echo started", timeout_ms=25_000)
    assert (result["stdout"], result["exit_code"]) == ("started\n", 0)
    assert still_running(processes_with(f"sleep {marker}")) == []


# --------------------------------------------------------------------------- unconfined


async def test_an_unconfined_run_says_so(sandbox: Sandbox) -> None:
    result = await run(ShellTool(bwrap=None), sandbox, "true")
    assert result["confined"] is False
    assert "NOT CONFINED" in result["note"]
    assert "disabled for this shell tool" in result["note"]
    assert "its environment included" in result["note"]


PROTECTED_CHILD = """
import os, subprocess, sys
from cleveragents.workspace.shell import protect_process
os.environ["DAEMON_ONLY_SECRET"] = "daemon-secret-should-not-leak"
print("applied" if protect_process() else "not-applied")
done = subprocess.run(["/bin/sh", "-c", "cat /proc/$PPID/environ"], capture_output=True)
print("leaked" if b"daemon-secret-should-not-leak" in done.stdout else "kept")
"""


def test_protect_process_hides_the_daemons_environment_from_its_commands() -> None:
    import subprocess

    if os.geteuid() == 0:
        from cleveragents.workspace.shell import protect_process

        assert protect_process() is False  # root reads every /proc entry anyway
        pytest.skip("the non-dumpable flag does not stop root; run as a user to test it")
    done = subprocess.run(
        [sys.executable, "-c", PROTECTED_CHILD], capture_output=True, timeout=BOUND_S, check=True
    )
    assert done.stdout.decode().split() == ["applied", "kept"]


async def test_the_environment_variable_turns_confinement_off(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BWRAP_ENV, "off")
    result = await run(ShellTool(), sandbox, "true")
    assert result["confined"] is False
    assert f"{BWRAP_ENV}=off" in result["note"]


async def test_a_missing_bwrap_runs_unconfined_and_says_why(sandbox: Sandbox) -> None:
    result = await run(ShellTool(bwrap="/nonexistent/bwrap"), sandbox, "true")
    assert result["confined"] is False
    assert "was not found" in result["note"]


async def test_a_bwrap_that_cannot_sandbox_is_treated_as_absent(sandbox: Sandbox) -> None:
    tool = ShellTool(bwrap="/bin/false")
    result = await run(tool, sandbox, "true")
    assert result["confined"] is False
    assert "cannot create a sandbox here" in result["note"]
    assert tool.confinement() is tool.confinement()  # probed once, cached


def test_the_bwrap_command_line_hides_then_binds_the_root_writable() -> None:
    root = "/tmp/project"
    argv = ShellTool(bwrap=None).bwrap_argv("/usr/bin/bwrap", root, "make test")
    for flag in ("--unshare-user", "--unshare-net", "--unshare-pid", "--die-with-parent"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[argv.index("--ro-bind") : argv.index("--ro-bind") + 3] == ["--ro-bind", "/", "/"]
    assert argv[argv.index("--tmpfs") + 1] == os.path.realpath("/tmp") or "/tmp" in argv
    bind = argv.index("--bind")
    assert argv[bind : bind + 3] == ["--bind", root, root]
    assert all(i < bind for i, arg in enumerate(argv) if arg == "--tmpfs")
    assert argv[-3:] == ["/bin/sh", "-c", "make test"]


# --------------------------------------------------------------------------- confined


@pytest.fixture
def confined(sandbox: Sandbox) -> ShellTool:
    require_bwrap()
    return shell_tool("bwrap", sandbox)


async def test_a_confined_run_says_so(sandbox: Sandbox, confined: ShellTool) -> None:
    result = await run(confined, sandbox, "true")
    assert result["confined"] is True
    assert "note" not in result


async def test_a_confined_command_cannot_read_a_sibling_directory(
    sandbox: Sandbox, confined: ShellTool
) -> None:
    result = await run(confined, sandbox, f"cat {shlex.quote(str(sandbox.canary))}/secret.txt")
    assert result["exit_code"] != 0
    assert CANARY_TEXT.strip() not in result["stdout"]


async def test_a_confined_command_cannot_write_outside_the_workspace(
    sandbox: Sandbox, confined: ShellTool
) -> None:
    before = sandbox.snapshot()
    canary = shlex.quote(str(sandbox.canary))
    etc = await run(confined, sandbox, "touch /etc/cleveragents-canary")
    assert etc["exit_code"] != 0
    assert "Read-only file system" in etc["stderr"]
    for command in (f"echo x > {canary}/new.txt", f"rm {canary}/secret.txt"):
        assert (await run(confined, sandbox, command))["exit_code"] != 0
    assert not exists("/etc/cleveragents-canary")
    assert sandbox.snapshot() == before


async def test_a_confined_command_cannot_remount_the_system_writable(
    sandbox: Sandbox, confined: ShellTool
) -> None:
    result = await run(confined, sandbox, "mount -o remount,rw / && touch /etc/cleveragents-rw")
    assert result["exit_code"] != 0
    assert not exists("/etc/cleveragents-rw")


async def test_a_confined_command_can_write_inside_the_workspace(
    sandbox: Sandbox, confined: ShellTool
) -> None:
    result = await run(confined, sandbox, "mkdir -p out && echo made > out/f.txt")
    assert result["exit_code"] == 0
    assert (sandbox.root / "out" / "f.txt").read_text() == "made\n"


async def test_a_confined_command_cannot_reach_a_loopback_listener(
    sandbox: Sandbox, confined: ShellTool
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        script = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        command = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"
        unconfined = await run(ShellTool(bwrap=None), sandbox, command)
        assert unconfined["exit_code"] == 0, unconfined["stderr"]  # the listener is reachable
        result = await run(confined, sandbox, command)
    assert result["exit_code"] != 0
    assert "Error" in result["stderr"]


async def test_a_confined_command_cannot_reach_a_unix_socket_outside_the_workspace(
    sandbox: Sandbox, confined: ShellTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sandbox.canary)  # a relative bind: AF_UNIX paths are short
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("daemon.sock")
        server.listen()
        script = "import socket; socket.socket(socket.AF_UNIX).connect('daemon.sock')"
        canary = shlex.quote(str(sandbox.canary))
        command = f"cd {canary} && {shlex.quote(sys.executable)} -c {shlex.quote(script)}"
        reachable = await run(ShellTool(bwrap=None), sandbox, command)
        result = await run(confined, sandbox, command)
    assert reachable["exit_code"] == 0, reachable["stderr"]
    assert result["exit_code"] != 0


CONFINED_CHILD = """
import asyncio, json, sys
from cleveragents.workspace import ShellTool
tool = ShellTool()
command = "env; for f in /proc/$PPID/environ /proc/1/environ; do tr '\\\\0' '\\\\n' < $f; done"
inputs = {"command": command, "sandbox_root": sys.argv[1], "resource_bindings": {}}
print(json.dumps(asyncio.run(tool(inputs))))
"""


def test_keys_in_the_daemons_own_environment_stay_out_of_a_confined_shell(
    sandbox: Sandbox, confined: ShellTool
) -> None:
    import json
    import subprocess

    # A real process environment (monkeypatch changes os.environ, not /proc/self/environ).
    env = {**os.environ, **LEAKY_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", CONFINED_CHILD, str(sandbox.root)],
        env=env, capture_output=True, timeout=BOUND_S, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    assert result["confined"] is True
    assert f"HOME={sandbox.root}" in result["stdout"]
    assert "should-not-leak" not in result["stdout"] + result["stderr"]


def test_run_and_its_unix_sockets_are_hidden_by_default() -> None:
    from cleveragents.workspace.shell import DEFAULT_HIDDEN_PATHS

    assert {"/run", "/tmp", "/home", "/root"} <= set(DEFAULT_HIDDEN_PATHS)


# --------------------------------------------------------------------------- the pinned root


def test_the_bwrap_command_line_binds_the_root_descriptor_not_the_roots_name() -> None:
    root = "/tmp/project"
    argv = ShellTool(bwrap=None).bwrap_argv("/usr/bin/bwrap", root, "make test", root_fd=7)
    bind = argv.index("--bind-fd")
    assert argv[bind : bind + 3] == ["--bind-fd", "7", root]
    assert "--bind" not in argv


async def test_a_confined_command_is_given_the_pinned_descriptor_to_bind(
    sandbox: Sandbox, confined: ShellTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound: list[tuple[int, int]] = []
    bwrap_argv = confined.bwrap_argv

    def record(*args: Any, **kwargs: Any) -> list[str]:
        argv = bwrap_argv(*args, **kwargs)
        info = os.fstat(int(argv[argv.index("--bind-fd") + 1]))  # open while the call runs
        bound.append((info.st_dev, info.st_ino))
        return argv

    monkeypatch.setattr(confined, "bwrap_argv", record)
    pin = PinnedRoot.open(str(sandbox.root))
    with pin.activate():
        assert (await run(confined, sandbox, "true"))["confined"] is True
    assert bound == [(pin.device, pin.inode)]


async def test_a_root_name_swapped_after_the_check_still_runs_the_command_in_the_pinned_root(
    sandbox: Sandbox, shell_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoy = sandbox.base / "decoy"
    decoy.mkdir()
    pinned = sandbox.root.with_name("ws.pinned")
    check = shell.sandbox_root

    def check_then_swap(inputs: dict[str, Any]) -> str:
        real = check(inputs)  # the pin's check passes, then the name moves
        sandbox.root.rename(pinned)
        sandbox.root.symlink_to(decoy, target_is_directory=True)
        return real

    monkeypatch.setattr(shell, "sandbox_root", check_then_swap)
    tool = shell_tool(shell_mode, sandbox)
    with PinnedRoot.open(str(sandbox.root)).activate():
        result = await run(tool, sandbox, "pwd -P; echo made > made.txt")
    assert result["exit_code"] == 0, result["stderr"]
    assert (pinned / "made.txt").read_text() == "made\n"
    assert list(decoy.iterdir()) == []
    if shell_mode == "unconfined":  # under bwrap the pinned directory is mounted at the root
        assert result["stdout"].splitlines()[0] == str(pinned)


# --------------------------------------------------------------------------- confined: truth


def failing_setup(tool: ShellTool) -> Callable[..., list[str]]:
    """``tool.bwrap_argv`` with a bind bwrap cannot make, added after the probe."""
    bwrap_argv = tool.bwrap_argv

    def argv(*args: Any, **kwargs: Any) -> list[str]:
        full = bwrap_argv(*args, **kwargs)
        return [full[0], "--ro-bind", "/nonexistent/cleveragents-source", "/mnt", *full[1:]]

    return argv


async def test_a_sandbox_that_fails_to_set_up_fails_the_call_instead_of_claiming_confined(
    sandbox: Sandbox, confined: ShellTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await run(confined, sandbox, "true"))["confined"] is True  # probed and working
    monkeypatch.setattr(confined, "bwrap_argv", failing_setup(confined))
    with pytest.raises(WorkspaceToolError) as info:
        await run(confined, sandbox, "touch ran")
    assert info.value.code == WorkspaceToolError.code
    assert "/nonexistent/cleveragents-source" in info.value.message  # bwrap's own stderr
    assert not (sandbox.root / "ran").exists()  # the command never ran


async def test_a_confined_command_that_prints_a_bwrap_error_is_still_reported_confined(
    sandbox: Sandbox, confined: ShellTool
) -> None:
    result = await run(confined, sandbox, "echo 'bwrap: Can not mount' >&2; touch ran; exit 1")
    assert (result["confined"], result["exit_code"]) == (True, 1)
    assert result["stderr"] == "bwrap: Can not mount\n"
    assert (sandbox.root / "ran").exists()
