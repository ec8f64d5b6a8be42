"""``cleveragents run`` runs the run service in its own process: no daemon, no pygls;
its ``--json`` lines are the daemon's notifications (the transcript's lines); a refused
request names the flag; and a cancelled run leaves none of its commands behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import kill_matching, processes_with, read_fifo, still_running

from cleveragents.client.commands import refusal_text
from cleveragents.runs import RunRequestError
from cleveragents.transcripts import RunNotFoundError, TranscriptStore
from kit.cli import COMMAND, clean_env, runs, spawn_json_run, workspace
from kit.models import call, script_file, shell


def transcript_lines(state: Path) -> list[str]:
    """The notification lines of the only run in ``state`` (its ``$/meta`` line left out)."""
    [summary] = TranscriptStore(state).summaries()
    path = TranscriptStore(state).path(summary["runId"])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["method"] == "$/meta"
    return lines[1:]


def test_a_run_loads_neither_the_daemon_nor_pygls_nor_rich(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "hi", "toolCalls": [call("builtin/file-list")]},
                        {"content": "bye"})  # fmt: skip
    args = ["run", "-m", model, "--state-dir", str(tmp_path / "state"),
            "--workspace", str(tmp_path), "go"]  # fmt: skip
    code = (
        "import sys\n"
        "from cleveragents.cli import main\n"
        f"code = main({args!r})\n"
        "loaded = ('pygls', 'lsprotocol', 'cleveragents.daemon', 'cleveragents.rpc', 'rich')\n"
        "print(sorted(name for name in loaded if name in sys.modules))\n"
        "sys.exit(code)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env=clean_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "completed: 2 iterations" in out.stderr  # it did run
    assert out.stdout.splitlines() == ["bye", "[]"]  # the answer, then the modules


def test_json_lines_are_the_transcript_lines_byte_for_byte(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("café ☕ 𝄞\n")
    model = script_file(tmp_path, {"content": "Reading «notes».", "toolCalls": [
        call("builtin/file-read", path="notes.txt"), call("builtin/file-read", path="missing"),
        call("builtin/no-such-tool")]}, {"content": "Done: café."})  # fmt: skip
    state = tmp_path / "state"
    out = subprocess.run(
        [*COMMAND, "run", "go", "--json", "-m", model, "--state-dir", str(state)],
        capture_output=True, timeout=60, env=clean_env(tmp_path), cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode("utf-8").splitlines() == transcript_lines(state)


def test_json_lines_escape_controls_and_are_otherwise_the_transcript_s(tmp_path: Path) -> None:
    hostile = "\x1b]0;title\x07 \x9b2J \x7f"
    model = script_file(tmp_path, {"content": f"a{hostile}b", "toolCalls": [
        call("builtin/file-read", path=f"x{hostile}")]}, {"content": "done"})  # fmt: skip
    state = tmp_path / "state"
    out = subprocess.run(
        [*COMMAND, "run", "go", "--json", "-m", model, "--state-dir", str(state)],
        capture_output=True, timeout=60, env=clean_env(tmp_path), cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    stdout = out.stdout.decode("utf-8")
    assert not any(c in stdout for c in "\x1b\x07\x9b\x7f")
    recorded = transcript_lines(state)
    assert [json.loads(line) for line in stdout.splitlines()] == [json.loads(r) for r in recorded]


@pytest.mark.parametrize(
    ("field", "flag"),
    [("max_iterations", "--max-iterations"), ("system_prompt", "--system"),
     ("automation_profile", "--profile"), ("continue_from", "--continue"),
     ("sandbox_root", "--workspace"), ("model", "--model"), ("prompt", "the prompt")],
)  # fmt: skip
def test_a_refused_field_is_named_by_its_flag(field: str, flag: str) -> None:
    assert refusal_text(RunRequestError(field, "is wrong")) == f"{flag}: is wrong"


def test_other_refusals_keep_their_message_in_flag_words() -> None:
    assert refusal_text(RunNotFoundError("unknown run 'x'")) == "unknown run 'x'"
    error = RunNotFoundError("params.continueFrom: no such run")
    assert refusal_text(error) == "--continue: no such run"


def test_a_request_the_service_refuses_is_a_usage_error_naming_the_flag(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "x"})
    # Bytes that are not UTF-8 reach Python as lone surrogates, which no transcript holds.
    argv = [*COMMAND, "run", "-m", model, "--state-dir", str(tmp_path / "s")]

    def run(*args: str | bytes) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60,
                              env=clean_env(tmp_path), cwd=workspace(tmp_path),
                              stdin=subprocess.DEVNULL)  # fmt: skip

    system, prompt = run("--system", b"be \xff", "go"), run(b"go \xff")
    assert (system.returncode, prompt.returncode) == (2, 2)
    assert system.stderr == "cleveragents run: --system: invalid Unicode (a lone surrogate)\n"
    assert prompt.stderr == "cleveragents run: the prompt: invalid Unicode (a lone surrogate)\n"
    assert runs(tmp_path / "s") == []  # refused before the run existed


def _interrupted(
    tmp_path: Path, marker: str, when: str, signum: int = signal.SIGINT
) -> tuple[int, str]:
    """Run a scripted ``builtin/shell`` call of ``sleep MARKER`` and send ``signum``
    ``when`` the tool call is reported started, or once the command itself runs; the exit
    code and stderr."""
    command = f"sleep {marker}"
    if when == "running":
        os.mkfifo(workspace(tmp_path) / "ready.fifo")
        command = f"echo ready > ready.fifo; {command}"
    model = script_file(tmp_path, {"content": "waiting", "toolCalls": [shell(command)]})
    process = spawn_json_run(tmp_path, model)
    try:
        assert process.stdout is not None
        if when == "started":
            for line in process.stdout:  # bounded: the run cannot end before its sleep
                if '"run/toolCallStarted"' in line:
                    break
        else:
            assert read_fifo(workspace(tmp_path) / "ready.fifo") == b"ready\n"
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
        process.wait()
    return process.returncode, stderr


@pytest.mark.parametrize("when", ["started", "running"])
def test_ctrl_c_leaves_no_command_behind(tmp_path: Path, when: str) -> None:
    marker = f"30.{os.getpid()}{len(when)}"  # a duration of its own, to find it afterwards
    try:
        code, stderr = _interrupted(tmp_path, marker, when)
        left = still_running(processes_with(f"sleep {marker}"))
    finally:
        kill_matching(f"sleep {marker}")
    assert code == 130
    assert stderr.strip() == "cancelling the run (Ctrl-C again to quit at once)"
    assert left == []
    [summary] = runs(tmp_path / "state")
    assert summary["status"] == "cancelled"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_cancel_the_run_and_leave_no_command_behind(
    tmp_path: Path, signum: signal.Signals
) -> None:
    marker = f"30.{os.getpid()}{int(signum)}"
    try:
        code, stderr = _interrupted(tmp_path, marker, "running", signum)
        left = still_running(processes_with(f"sleep {marker}"))
    finally:
        kill_matching(f"sleep {marker}")
    assert code == 128 + signum
    assert stderr.strip() == f"{signum.name}: cancelling the run"
    assert left == []
    [summary] = runs(tmp_path / "state")
    assert summary["status"] == "cancelled"
