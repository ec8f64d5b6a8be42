"""``cleveragents run`` on a pseudo-terminal: the live view, approvals answered ``y`` and
``a``, and Ctrl-C during a slow tool (exit 130, a ``cancelled`` transcript, no
traceback); a second Ctrl-C quits while the cancel is still under way."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect
import pytest
from cli_kit import kill_matching, read_fifo

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
    # stderr goes to a file: the live view owns the terminal.
    command = (f"exec {sys.executable} -m cleveragents run -m {model} "
               f"--state-dir {state} 'write a note, then wait' 2>{err}")  # fmt: skip
    child = pexpect.spawn(
        "/bin/sh", ["-c", command], cwd=str(tmp_path / "ws"), env=clean_env(tmp_path),
        encoding="utf-8", dimensions=(40, 120), timeout=20,
    )  # fmt: skip
    try:
        child.expect(r"builtin/file-write wants to run")
        child.expect(r"allow\? \[y\]es / \[n\]o / \[a\]lways")
        child.sendline("y")
        child.expect(r"builtin/shell wants to run")
        child.expect(r"allow\?")
        child.sendline("a")
        # [a]lways: the second shell call is not asked about; the live view shows it
        # running (after the third iteration's text: the second call's row also said
        # running, and a Ctrl-C sent then came before the third call started).
        child.expect(r"Now a slow one")
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


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_a_second_ctrl_c_quits_at_once_while_the_cancel_is_under_way(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    os.mkfifo(tmp_path / "ws" / "ready.fifo")
    # A job that leaves the command's process group keeps its output open: the cancel
    # then waits the shell tool's grace period (2 s) for the output before it ends.
    escapee = "sleep 31.25"  # a duration of its own, to find it afterwards
    slow = f"setsid {escapee} & echo ready > ready.fifo; sleep 30"
    model = script_file(tmp_path, {"content": "Waiting.", "toolCalls": [shell(slow)]},
                        {"content": "never reached"})  # fmt: skip
    state = tmp_path / "state"
    command = (f"exec {sys.executable} -m cleveragents run -m {model} --yes "
               f"--state-dir {state} 'wait' 2>{tmp_path / 'stderr.txt'}")  # fmt: skip
    child = pexpect.spawn("/bin/sh", ["-c", command], cwd=str(tmp_path / "ws"),
                          env=clean_env(tmp_path), encoding="utf-8", dimensions=(40, 120),
                          timeout=20)  # fmt: skip
    try:
        assert read_fifo(tmp_path / "ws" / "ready.fifo") == b"ready\n"  # the command runs
        child.sendintr()
        child.expect("cancelling the run")
        child.sendintr()
        child.expect(pexpect.EOF)
        screen = child.before
    finally:
        child.close(force=True)
        kill_matching(escapee)
    assert child.exitstatus == 130
    assert "Traceback" not in screen
    # It did not wait for the cancel: the run's end was never recorded (an interrupted
    # run reads as failed; a cancel that had ended would read as cancelled).
    assert runs(state)[0]["status"] == "failed"
