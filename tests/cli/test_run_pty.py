"""``cleveragents run`` on a pseudo-terminal: the live view, approvals answered ``y`` and
``a``, and Ctrl-C during a slow tool (exit 130, a ``cancelled`` transcript, no traceback
from the command or the daemon)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from pathlib import Path

import pexpect
import pytest

from kit.cli import clean_env, runs
from kit.models import script_file, shell

WRITE = {"name": "builtin/file-write", "arguments": {"path": "note.txt", "content": "seen\n"}}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_live_view_approvals_and_ctrl_c_cancel_the_run_cleanly(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    state, err = tmp_path / "state", tmp_path / "stderr.txt"
    model = script_file(
        tmp_path,
        {"content": "Writing a note.", "toolCalls": [WRITE]},
        {"content": "Checking the shell.", "toolCalls": [shell("true")]},
        {"content": "Now a slow one.", "toolCalls": [shell("sleep 30")]},
        {"content": "never reached"},
    )
    # stderr goes to a file: both processes' (the daemon's is passed on by the command).
    command = (f"exec {sys.executable} -m cleveragents run -m {model} "
               f"--state-dir {state} 'write a note, then wait' 2>{err}")  # fmt: skip
    child = pexpect.spawn(
        "/bin/sh", ["-c", command], cwd=str(tmp_path / "ws"), env=clean_env(tmp_path),
        encoding="utf-8", dimensions=(40, 120), timeout=20,
    )  # fmt: skip
    try:
        child.expect(r"builtin/file-write asks to run")
        child.expect(r"allow\? \[y\]es / \[n\]o / \[a\]lways")
        child.sendline("y")
        child.expect(r"builtin/shell asks to run")
        child.expect(r"allow\?")
        child.sendline("a")
        # [a]lways: the second shell call is not asked about; the live view shows it running.
        child.expect(r"running.*builtin/shell")
        assert "allow?" not in child.before
        child.sendintr()
        child.expect("cancelling the run")
        child.expect("cancelled")
        child.expect(pexpect.EOF)
        screen = child.before
    finally:
        child.close(force=True)
    assert child.exitstatus == 130
    assert (tmp_path / "ws" / "note.txt").read_text() == "seen\n"  # answered y
    [summary] = runs(state)
    assert summary["status"] == "cancelled"
    assert summary["toolCallCount"] == 3
    assert re.search(r"run [0-9a-f]{32} · transcript", screen)
    assert "Traceback" not in screen
    assert err.read_text() == ""


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _kill_matching(marker: str) -> None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_a_second_ctrl_c_quits_at_once_when_the_cancel_hangs(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    slow = "sleep 31.25"  # a duration of its own, to find it afterwards
    model = script_file(tmp_path, {"content": "Waiting.", "toolCalls": [shell(slow)]},
                        {"content": "never reached"})  # fmt: skip
    command = (f"exec {sys.executable} -m cleveragents run -m {model} --yes "
               f"--state-dir {tmp_path / 'state'} 'wait' 2>{tmp_path / 'stderr.txt'}")  # fmt: skip
    child = pexpect.spawn("/bin/sh", ["-c", command], cwd=str(tmp_path / "ws"),
                          env=clean_env(tmp_path), encoding="utf-8", dimensions=(40, 120),
                          timeout=20)  # fmt: skip
    daemons: list[int] = []
    try:
        child.expect(r"running.*builtin/shell")
        daemons = _children(child.pid)
        assert daemons, "the daemon was not found"
        for pid in daemons:
            os.kill(pid, signal.SIGSTOP)  # a daemon that will not answer the cancel
        child.sendintr()
        child.expect("cancelling the run")
        child.sendintr()
        child.expect(pexpect.EOF)
        screen = child.before
    finally:
        child.close(force=True)
        for pid in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _kill_matching(slow)
    assert child.exitstatus == 130
    assert "Traceback" not in screen
    for pid in daemons:  # the command took its daemon with it
        assert (
            not Path(f"/proc/{pid}").exists()
            or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
        )
