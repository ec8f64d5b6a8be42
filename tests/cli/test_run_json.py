"""``cleveragents run --json``: every line is a protocol notification, as received, and
the last is ``run/finished``, also when Ctrl-C cancelled the run; a closed pipe ends the
command quietly."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from cleveragents.protocol import BY_NAME, structure, unstructure
from kit.cli import COMMAND, clean_env, runs, spawn_json_run
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
        capture_output=True, text=True, timeout=60, env=clean_env(tmp_path), cwd=tmp_path,
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


def test_a_closed_pipe_cancels_the_run_quietly(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "again " * 200, "toolCalls": [
        {"name": "builtin/file-list", "arguments": {}}]})  # fmt: skip
    process = subprocess.Popen(
        [*COMMAND, "run", "go", "-m", model, "--max-iterations", "10000",
         "--state-dir", str(tmp_path / "state")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        process.stdout.readline()
        process.stdout.close()  # as `| head -1` does
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 141
    assert stderr == b""
    assert runs(tmp_path / "state")[0]["status"] == "cancelled"
