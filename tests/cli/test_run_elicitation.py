"""``cleveragents run`` asks an MCP server's elicitation at the terminal (a form typed
field by field, a URL shown with its host), and declines it off a terminal, saying so.
Through the real command and a real SDK server (``--mcp``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from kit.cli import clean_env, runs
from kit.models import script_file
from kit.paths import MCP_SERVERS

SERVER = f"ask={sys.executable} {MCP_SERVERS / 'asking_server.py'}"


def model(tmp_path: Path, tool: str) -> Path:
    return script_file(
        tmp_path, {"toolCalls": [{"name": f"mcp:ask/{tool}", "arguments": {}}]}, {"content": "ok"}
    )


def asking(tmp_path: Path, tool: str, prompt: str) -> pexpect.spawn:
    """``cleveragents run`` on a pseudo-terminal, its model calling ``tool`` of the
    asking server (its transcripts under ``tmp_path/state``)."""
    (tmp_path / "ws").mkdir()
    command = [
        "-m", "cleveragents", "run", "-m", str(model(tmp_path, tool)), "--profile",
        "full-auto", "--state-dir", str(tmp_path / "state"), "--mcp", SERVER, prompt,
    ]  # fmt: skip
    return pexpect.spawn(
        sys.executable, command, cwd=str(tmp_path / "ws"), env=clean_env(tmp_path),
        encoding="utf-8", dimensions=(40, 120), timeout=30,
    )  # fmt: skip


def outputs(state: Path) -> list[object]:
    [summary] = runs(state)
    lines = (state / "runs" / f"{summary['runId']}.jsonl").read_text().splitlines()
    records = [json.loads(line)["params"] for line in lines if '"run/toolCall"' in line]
    return [record["record"]["output"] for record in records]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_a_form_is_asked_field_by_field_on_the_terminal(tmp_path: Path) -> None:
    child = asking(tmp_path, "ask_name", "ask me")
    try:
        child.expect("MCP server ask asks:")
        child.expect("What is your name")
        child.expect(r"answer\? \[y\]es, \[n\]o, \[c\]ancel: ")
        child.sendline("y")
        child.expect(r"name \(Your name\): ")
        child.sendline("")  # required: asked again
        child.expect(r"name \(Your name\): ")
        child.sendline("Ada")
        child.expect(r"age \(Your age\) \(integer\), optional: ")
        child.sendline("old")
        child.expect("not a valid answer")
        child.sendline("36")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert outputs(tmp_path / "state") == ["accept:Ada:36"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_a_url_is_shown_with_its_host_and_cancel_is_an_answer(tmp_path: Path) -> None:
    child = asking(tmp_path, "open_link", "sign in")
    try:
        child.expect("open a page on example.com")
        child.expect("https://example.com/login")
        child.expect(r"open it\? ")
        child.sendline("c")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert outputs(tmp_path / "state") == ["cancel"]


def test_off_a_terminal_the_question_is_declined_and_said(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    state = tmp_path / "state"
    done = subprocess.run(
        [sys.executable, "-m", "cleveragents", "run", "-m", str(model(tmp_path, "ask_name")),
         "--profile", "full-auto", "--state-dir", str(state), "--mcp", SERVER, "ask me"],
        cwd=tmp_path / "ws", env=clean_env(tmp_path), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60, start_new_session=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "declined: MCP server ask asked a question" in done.stderr
    assert outputs(state) == ["decline"]
