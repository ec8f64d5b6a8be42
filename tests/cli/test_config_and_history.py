"""``config.toml`` and its precedence, ``cleveragents config``, ``runs list`` and
``runs show``, and ``run --continue`` across processes (each ``run`` is one)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cleveragents.transcripts import META, TranscriptStore
from kit.cli import cli, meta, runs
from kit.models import script_file


def write_config(tmp_path: Path, text: str) -> None:
    folder = tmp_path / "config" / "cleveragents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(text)


def test_flags_override_the_environment_which_overrides_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "cleveragents" / "config.toml"
    write_config(tmp_path, 'model = "scripted:file.json"\nprofile = "review"\n'
                 f'state_dir = "{tmp_path / "from-file"}"\n')  # fmt: skip
    shown = json.loads(cli(tmp_path, "config", "--json", CLEVERAGENTS_PROFILE="trusted").stdout)
    assert shown["configFile"] == str(path)
    assert shown["settings"] == {
        "model": {"value": "scripted:file.json", "source": str(path)},
        "profile": {"value": "trusted", "source": "$CLEVERAGENTS_PROFILE"},
        "state_dir": {"value": str(tmp_path / "from-file"), "source": str(path)},
    }
    human = cli(tmp_path, "config").stdout
    assert f"profile      review  ({path})" in human
    # A run takes the file's model and state dir; --state-dir wins over both.
    model = script_file(tmp_path, {"content": "configured"}, name="file.json")
    write_config(tmp_path, f'model = "{model}"\nstate_dir = "{tmp_path / "from-file"}"\n')
    assert cli(tmp_path, "run", "go").returncode == 0
    assert cli(tmp_path, "run", "go", "--state-dir", str(tmp_path / "flag")).returncode == 0
    assert len(runs(tmp_path / "from-file")) == len(runs(tmp_path / "flag")) == 1


def test_a_bad_config_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    write_config(tmp_path, 'modle = "openai:gpt-4o-mini"\n')
    out = cli(tmp_path, "run", "go")
    assert out.returncode == 2
    assert "config.toml: unknown key 'modle'" in out.stderr


def test_runs_list_is_a_table_with_a_header_and_show_is_a_human_view(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    model = script_file(tmp_path, {"content": "Listed.",
                                   "toolCalls": [{"name": "builtin/file-list", "arguments": {}}]},
                        {"content": "All done."})  # fmt: skip
    for prompt in ("first prompt", "second prompt"):
        assert cli(tmp_path, "run", "-m", model, "--state-dir", state, prompt).returncode == 0
    listing = cli(tmp_path, "runs", "list", "--state-dir", state,
                  COLUMNS="400").stdout.splitlines()  # fmt: skip
    assert listing[0].split() == [
        "RUN", "STARTED", "STATUS", "ITER", "CALLS", "MODEL", "WORKSPACE", "PROMPT",
    ]  # fmt: skip
    row = listing[1].split()
    assert row[3:6] == ["completed", "2", "1"]
    assert row[6].startswith("scripted:")  # the model, cut to its column
    assert row[7].endswith(tmp_path.name)  # the workspace, cut from the left
    assert row[8:] == ["second", "prompt"]
    assert len(row[0]) == 8  # a short id, which every command takes
    assert len(listing) == 3
    limited = json.loads(cli(tmp_path, "runs", "list", "--limit", "1", "--json",
                             "--state-dir", state).stdout)  # fmt: skip
    assert [r["prompt"] for r in limited] == ["second prompt"]
    assert (limited[0]["model"], limited[0]["workspace"]) == (model, str(tmp_path))
    shown = cli(tmp_path, "runs", "show", row[0], "--state-dir", state).stdout
    assert f"run         {limited[0]['runId']}" in shown
    assert f"workspace   {tmp_path}" in shown
    assert f"model       {model}" in shown
    assert "profile     supervised" in shown
    assert "status      completed" in shown
    assert "content:\n  All done." in shown
    assert "prompt:\n  second prompt" in shown
    assert "1  1     ok      builtin/file-list" in shown


def test_continue_picks_the_latest_run_of_this_workspace_or_the_one_named(
    tmp_path: Path,
) -> None:
    state = str(tmp_path / "state")
    (tmp_path / "other").mkdir()
    model = script_file(tmp_path, {"content": "ok"})
    assert cli(tmp_path, "run", "-m", model, "--state-dir", state, "one").returncode == 0
    [first] = runs(tmp_path / "state")
    other = cli(tmp_path, "run", "-m", model, "--state-dir", state, "elsewhere",
                cwd=tmp_path / "other")  # fmt: skip
    assert other.returncode == 0
    # A new process: the conversation comes back from the transcript (tests/daemon covers
    # its content); the latest run *in this workspace* is the first one.
    latest = cli(tmp_path, "run", "-m", model, "--state-dir", state, "--continue", "two")
    assert latest.returncode == 0, latest.stderr
    second = runs(tmp_path / "state")[0]
    assert meta(tmp_path / "state", second["runId"])["continueFrom"] == first["runId"]
    named = cli(tmp_path, "run", "-m", model, "--state-dir", state, "--continue",
                second["runId"], "three")  # fmt: skip
    assert named.returncode == 0, named.stderr
    third = runs(tmp_path / "state")[0]
    assert meta(tmp_path / "state", third["runId"])["continueFrom"] == second["runId"]
    unknown = cli(tmp_path, "run", "-m", model, "--state-dir", state, "--continue", "nope", "x")
    assert unknown.returncode == 2
    assert "unknown run 'nope'" in unknown.stderr


def test_runs_list_and_show_load_neither_the_daemon_nor_pygls(tmp_path: Path) -> None:
    """Looking at past runs reads files: it must not pay for the daemon's imports."""
    state = tmp_path / "state"
    store = TranscriptStore(state)
    transcript = store.claim("past")
    transcript.append(META, {"runId": "past", "prompt": "p", "startedAt": "2026-01-01T00:00:00"})
    transcript.close()
    code = (
        "import sys\n"
        "from cleveragents.cli import main\n"
        f"main(['runs', 'list', '--state-dir', {str(state)!r}])\n"
        f"main(['runs', 'show', 'past', '--state-dir', {str(state)!r}])\n"
        "loaded = ('pygls', 'lsprotocol', 'cleveragents.daemon')\n"
        "print(sorted(name for name in loaded if name in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "past" in out.stdout  # it did list and show the run
    assert out.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "lines",
    [
        [{"method": "run/started", "params": [1, 2]},
         {"method": "run/toolCall", "params": {"record": "x"}},
         {"method": "run/finished", "params": {"runId": "bad", "seq": 3, "result": "done"}}],
        [{"method": "run/iteration", "params": {"iteration": "x", "toolCallCount": "y"}},
         {"method": "run/toolCall", "params": {"record": {"toolName": 5, "success": "yes"}}},
         {"method": "run/finished", "params": {"result": {"status": 5, "toolCallHistory": "x"}}}],
    ],
    ids=["params-a-list-result-a-string", "fields-of-the-wrong-type"],
)  # fmt: skip
def test_runs_show_reads_a_type_confused_transcript_as_torn_lines_never_a_traceback(
    tmp_path: Path, lines: list[dict[str, Any]]
) -> None:
    state = tmp_path / "state"
    (state / "runs").mkdir(parents=True)
    head = {"method": "$/meta", "params": {"runId": "bad", "prompt": "p", "continueFrom": None,
                                           "startedAt": "2026-12-03T00:00:00.000+00:00"}}  # fmt: skip
    (state / "runs" / "bad.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [head, *lines]))
    for args in (("runs", "show", "bad"), ("runs", "show", "bad", "--json"), ("runs", "list")):
        done = cli(tmp_path, *args, "--state-dir", str(state))
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 0
    shown = cli(tmp_path, "runs", "show", "bad", "--json", "--state-dir", str(state))
    result = json.loads(shown.stdout)
    assert result["status"] == "failed"  # the result that does not fit is torn: rebuilt
    assert result["toolCallHistory"] == []


def test_config_reports_a_profile_or_model_that_run_would_refuse(tmp_path: Path) -> None:
    fine = cli(tmp_path, "config", "--json", CLEVERAGENTS_PROFILE="trusted")
    assert fine.returncode == 0
    assert json.loads(fine.stdout)["problems"] == []
    bad = cli(tmp_path, "config", CLEVERAGENTS_PROFILE="reckless", CLEVERAGENTS_MODEL="nosuch:x")
    assert bad.returncode == 2
    assert "profile      reckless  ($CLEVERAGENTS_PROFILE)" in bad.stdout  # still shown
    assert bad.stderr.splitlines()[0] == (
        "cleveragents config: profile (from $CLEVERAGENTS_PROFILE): unknown profile "
        "'reckless'; choose one of manual, review, supervised, cautious, trusted, auto, ci, "
        "full-auto"
    )
    assert bad.stderr.splitlines()[1].startswith(
        "cleveragents config: $CLEVERAGENTS_MODEL: unknown model provider 'nosuch'"
    )
    as_json = cli(tmp_path, "config", "--json", CLEVERAGENTS_PROFILE="reckless")
    assert as_json.returncode == 2
    [problem] = json.loads(as_json.stdout)["problems"]
    assert "unknown profile 'reckless'" in problem


def test_runs_show_prints_durations_rounded(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    model = script_file(tmp_path, {"content": "Listed.", "toolCalls": [
        {"name": "builtin/file-list", "arguments": {}}]}, {"content": "done"})  # fmt: skip
    assert cli(tmp_path, "run", "-m", model, "--state-dir", state, "go").returncode == 0
    run_id = runs(tmp_path / "state")[0]["runId"]
    result = json.loads(cli(tmp_path, "runs", "show", run_id, "--json", "--state-dir",
                            state).stdout)  # fmt: skip
    durations = [result["durationMs"], *(r["durationMs"] for r in result["toolCallHistory"])]
    assert all(round(d, 3) == d for d in durations)  # to the microsecond, no float noise
    human = cli(tmp_path, "runs", "show", run_id, "--state-dir", state).stdout
    [line] = [x for x in human.splitlines() if x.startswith("duration")]
    assert re.fullmatch(r"duration    \d+(\.\d)? (ms|s)", line)
