"""``cleveragents run`` on a pseudo-terminal: the live view, approvals answered ``y`` and
``a``, and Ctrl-C during a slow tool (exit 130, a ``cancelled`` transcript, no traceback
from the command or the daemon)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pexpect
import pytest
from clikit import clean_env, runs, script, shell

WRITE = {"name": "builtin/file-write", "arguments": {"path": "note.txt", "content": "seen\n"}}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_live_view_approvals_and_ctrl_c_cancel_the_run_cleanly(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    state, err = tmp_path / "state", tmp_path / "stderr.txt"
    model = script(
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
