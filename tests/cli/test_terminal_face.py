"""``cleveragents run`` as a person sees it on a terminal (a pseudo-terminal read through
a terminal emulator): an approval comes after what the model said and shows the call's
own arguments; with stdin a pipe it is asked on /dev/tty; Ctrl-C keeps the text the
model had streamed, on the screen and in the result; the spinner turns."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pexpect
import pytest
from cli_kit import Screen, openai_model, openai_text

from cleveragents.transcripts import TranscriptStore
from kit.cli import clean_env, cli, meta, runs, workspace
from kit.loopback import LoopbackServer
from kit.models import script_file

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")

COLUMNS = 80
SAID = "I will write the release notes now; they list the two fixes of this week."
NOTES = (
    "# Notes\n" + "- fixed the parser, which " + "really " * 20 + "had a bug\n- fixed the docs\n"
)
WRITE = {"name": "builtin/file-write", "arguments": {
    "path": "notes.md", "content": NOTES, "sandbox_root": "/etc",  # the model's own: replaced
}}  # fmt: skip


def spawn(tmp_path: Path, command: str, screen: Screen, **env: str) -> pexpect.spawn:
    """``command`` (a shell line) on a pseudo-terminal of ``COLUMNS`` x 60 in the workspace."""
    child = pexpect.spawn(
        "/bin/sh", ["-c", command], cwd=str(workspace(tmp_path)), env=clean_env(tmp_path, **env),
        encoding="utf-8", dimensions=(60, COLUMNS), timeout=20,
    )  # fmt: skip
    child.logfile_read = screen
    return child


def run_line(tmp_path: Path, model: str, *args: str) -> str:
    return shlex.join([sys.executable, "-m", "cleveragents", "run", "-m", model,
                       "--state-dir", str(tmp_path / "state"), *args])  # fmt: skip


def test_an_approval_comes_after_the_model_s_text_and_shows_only_its_arguments(
    tmp_path: Path,
) -> None:
    model = script_file(tmp_path, {"content": SAID, "toolCalls": [WRITE]}, {"content": "Done."})
    screen = Screen(COLUMNS, 60)
    child = spawn(tmp_path, "exec " + run_line(tmp_path, model, "write the notes"), screen)
    try:
        child.expect(r"allow\? \[y\]es / \[n\]o / \[a\]lways")
        asking = screen.lines()
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert (workspace(tmp_path) / "notes.md").read_text() == NOTES
    said = next(i for i, line in enumerate(asking) if line.startswith("I will write"))
    question = asking.index("? builtin/file-write wants to run")
    assert said < question  # what the model said, then the question
    block = asking[question:]
    assert block[1] == "    path: notes.md"
    assert block[2] == "    content:"
    assert block[3] == "      # Notes"
    assert all(len(line) < COLUMNS for line in block)  # cut by us, not by the terminal
    arguments = [line.split(":")[0].strip() for line in block if line.startswith("    ") and
                 not line.startswith("      ")]  # fmt: skip
    assert arguments == ["path", "content"]  # no sandbox_root, no resource_bindings
    why = next(line for line in block if line.startswith("  why:"))
    assert "asks before write tools" in why
    assert "replaced by the run's" in " ".join(block)  # the model's own root was not used
    # The live region was taken down cleanly: no spinner row or tool row left behind.
    assert not any("iteration 1/" in line or "running" in line for line in asking)
    final = screen.lines()
    assert "? builtin/file-write wants to run" in final  # the question stays, intact
    assert not any("/25 ·" in line for line in final)  # the region's "iteration N/25 · ..."


def test_with_stdin_a_pipe_the_approval_is_asked_on_the_terminal(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": SAID, "toolCalls": [WRITE]}, {"content": "Done."})
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    command = f"printf 'the diff' | {run_line(tmp_path, model, 'write the notes')} >{out} 2>{err}"
    screen = Screen(COLUMNS, 60)
    child = spawn(tmp_path, command, screen)
    try:
        child.expect(r"allow\?")
        asking = screen.lines()
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert (workspace(tmp_path) / "notes.md").read_text() == NOTES  # answered on the terminal
    assert asking.index("? builtin/file-write wants to run") > asking.index(SAID)
    assert out.read_text() == "Done.\n"  # stdout holds the answer alone
    assert "completed" in err.read_text()
    [summary] = runs(tmp_path / "state")
    assert meta(tmp_path / "state", summary["runId"])["prompt"] == (
        "write the notes\n\n```\nthe diff\n```"
    )


def test_ctrl_c_keeps_the_streamed_text_on_screen_in_the_result_and_transcript(
    tmp_path: Path,
) -> None:
    partial = "The answer, so far, is that the parser"
    with LoopbackServer() as server:
        server.queue(openai_text(partial, hang=True))
        screen = Screen(COLUMNS, 60)
        child = spawn(tmp_path, "exec " + run_line(tmp_path, openai_model(server), "explain"), screen,
                      OPENAI_API_KEY="unused")  # fmt: skip
        try:
            child.expect("the parser")  # streamed into the live region; the model hangs
            child.expect("⠙")  # the spinner's second frame: it turns
            child.sendintr()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 130
    final = screen.lines()
    assert partial in final  # printed for good above the summary, not erased with the region
    assert any(line.startswith("■ cancelled") for line in final)
    state = tmp_path / "state"
    [summary] = runs(state)
    assert summary["status"] == "cancelled"
    assert TranscriptStore(state).result(summary["runId"])["content"] == partial
    lines = TranscriptStore(state).path(summary["runId"]).read_text().splitlines()
    finished = json.loads(lines[-1])
    assert finished["method"] == "run/finished"
    assert finished["params"]["result"]["content"] == partial
    shown = cli(tmp_path, "runs", "show", summary["runId"][:6], "--state-dir", str(state))
    assert f"content:\n  {partial}\n" in shown.stdout
