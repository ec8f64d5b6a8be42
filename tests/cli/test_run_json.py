"""``cleveragents run --json``: every line is a protocol notification, as received, and
the last is ``run/finished``, also when Ctrl-C cancelled the run; a closed pipe ends the
command quietly, whether it writes JSON lines or only the answer at the end."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cleveragents.protocol import BY_NAME, structure, unstructure
from kit.cli import COMMAND, clean_env, runs, spawn_json_run, spawn_run, workspace
from kit.models import script_file, shell


def parsed(stdout: str) -> list[dict[str, Any]]:
    """Each line as a notification, checked against the protocol's types."""
    lines = [json.loads(line) for line in stdout.splitlines()]
    for line in lines:
        assert set(line) == {"method", "params"}
        params_type = BY_NAME[line["method"]].params
        assert unstructure(structure(line["params"], params_type)) == line["params"]
    return lines


def test_json_lines_are_protocol_notifications_ending_with_run_finished(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "hi", "toolCalls": [
        {"name": "builtin/file-list", "arguments": {}}]}, {"content": "bye"})  # fmt: skip
    out = subprocess.run(
        [*COMMAND, "run", "go", "--json", "-m", model, "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, env=clean_env(tmp_path),
        cwd=workspace(tmp_path), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = parsed(out.stdout)
    assert [line["params"]["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert lines[0]["method"] == "run/started"
    assert lines[-1]["method"] == "run/finished"
    assert lines[-1]["params"]["result"]["content"] == "bye"
    assert out.stderr == ""


def test_ctrl_c_still_ends_the_json_with_run_finished_and_exits_130(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "waiting", "toolCalls": [shell("sleep 30")]})
    process = spawn_json_run(tmp_path, model)
    try:
        assert process.stdout is not None
        seen = []
        for line in process.stdout:  # bounded: the run cannot end before its 30 s sleep
            seen.append(line)
            if '"run/toolCallStarted"' in line:
                break
        process.send_signal(signal.SIGINT)
        rest, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 130
    lines = parsed("".join(seen) + rest)
    assert lines[-1]["method"] == "run/finished"
    assert lines[-1]["params"]["result"]["status"] == "cancelled"
    assert runs(tmp_path / "state")[0]["status"] == "cancelled"
    assert "Traceback" not in stderr
    assert stderr.strip() == "cancelling the run (Ctrl-C again to quit at once)"


@pytest.mark.parametrize("mode", ["json", "answer"])
def test_a_closed_pipe_cancels_the_run_quietly(tmp_path: Path, mode: str) -> None:
    """With --json the closed pipe is met by a write; the answer alone is written only at
    the end, so the command watches its stdout and notices the reader leave at once."""
    model = script_file(tmp_path, {"content": "again " * 200, "toolCalls": [
        {"name": "builtin/file-list", "arguments": {}}]})  # fmt: skip
    process = spawn_run(tmp_path, model, "--max-iterations", "10000",
                        *(["--json"] if mode == "json" else []))  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stderr is not None
        if mode == "json":
            process.stdout.readline()
        else:
            process.stderr.readline()  # the run's first line: it is under way
        process.stdout.close()  # as `| head -1` does once it has its line
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 141
    assert "Traceback" not in stderr
    assert "Error" not in stderr
    assert runs(tmp_path / "state")[0]["status"] == "cancelled"
