"""``cleveragents run`` and ``runs``: output and exit codes (``docs/cli.md``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kit.models import script_file


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "cleveragents", *args], capture_output=True, text=True,
        timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_run_json_prints_each_notification_as_a_line_and_exits_0(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "hi", "toolCalls": [{"name": "builtin/file-list", "arguments": {}}]},
                        {"content": "bye"})  # fmt: skip
    out = cli("run", "go", "--json", "--model", model, "--workspace", str(tmp_path),
              "--state-dir", str(tmp_path / "state"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines[0]["method"] == "run/started"
    assert lines[-1]["method"] == "run/finished"
    assert set(lines[0]) == {"method", "params"}
    assert lines[-1]["params"]["result"]["content"] == "bye"
    seqs = [line["params"]["seq"] for line in lines]
    assert seqs == list(range(1, len(lines) + 1))


def test_run_at_the_limit_exits_1(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"toolCalls": [{"name": "builtin/file-list", "arguments": {}}]})
    out = cli("run", "go", "--model", model, "--max-iterations", "2", "--workspace", str(tmp_path),
              "--state-dir", str(tmp_path / "state"))  # fmt: skip
    assert out.returncode == 1


def test_run_without_a_model_is_a_usage_error_that_says_how_to_set_one(tmp_path: Path) -> None:
    out = cli("run", "go", "--workspace", str(tmp_path), "--state-dir", str(tmp_path / "s"),
              env={"CLEVERAGENTS_MODEL": ""})  # fmt: skip
    assert out.returncode == 2
    assert "CLEVERAGENTS_MODEL" in out.stderr


def test_bad_arguments_exit_2() -> None:
    assert cli("run").returncode == 2
    assert cli("serve", "--tcp", "nonsense").returncode == 2


def test_runs_show_reads_a_transcript(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "done"})
    state = tmp_path / "state"
    assert (
        cli(
            "run", "go", "--model", model, "--workspace", str(tmp_path), "--state-dir", str(state)
        ).returncode
        == 0
    )
    listing = cli("runs", "list", "--json", "--state-dir", str(state))
    run_id = json.loads(listing.stdout)[0]["runId"]
    shown = cli("runs", "show", run_id, "--json", "--state-dir", str(state))
    assert json.loads(shown.stdout)["content"] == "done"  # the RunResult itself
    assert cli("runs", "show", "missing", "--state-dir", str(state)).returncode == 1


def test_the_demo_fixes_the_sample_shows_the_diff_and_keeps_its_transcript(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    out = cli("demo", "--state-dir", str(state), env={"NO_COLOR": "1"})
    assert out.returncode == 0, out.stderr
    assert "(editor) message shown: src/greet.py: greeting fixed" in out.stdout
    assert '\n-    return f"Helo, {name}!"\n+    return f"Hello, {name}!"\n' in out.stdout
    assert "run/" not in out.stdout  # no protocol method names
    assert out.stdout.count("ok      client/show-message") == 1
    run_id = json.loads(cli("runs", "list", "--json", "--state-dir", str(state)).stdout)[0]["runId"]
    shown = cli("runs", "show", run_id, "--state-dir", str(state))
    assert shown.returncode == 0
    assert "builtin/file-edit" in shown.stdout
    assert out.stdout.rstrip().splitlines()[-1].endswith('"explain this project"')
    assert "cleveragents run -m openai:gpt-4o-mini" in out.stdout
