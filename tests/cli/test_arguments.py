"""``cleveragents run``'s arguments: usage errors name the flag and exit 2 (never a
protocol field), the prompt may come from stdin, the model from a spec, JSON or @FILE,
and the workspace is never / or home by accident."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cleveragents import __version__
from kit.cli import cli, meta, runs
from kit.models import script_file

FIELDS = ("maxIterations", "automationProfile", "params.", "initializationOptions", "run/start")


def test_version_and_a_bare_command_print_without_error(tmp_path: Path) -> None:
    version = cli(tmp_path, "--version")
    assert (version.returncode, version.stdout) == (0, f"cleveragents {__version__}\n")
    bare = cli(tmp_path)
    assert bare.returncode == 0
    assert "run" in bare.stdout
    assert "serve" in bare.stdout
    runs_help = cli(tmp_path, "runs")
    assert runs_help.returncode == 0
    assert "{list,show,diff,revert,restore}" in runs_help.stdout


def test_run_help_lists_every_profile_and_what_it_asks(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", "--help")
    assert out.returncode == 0
    for name in ("manual", "review", "supervised", "cautious", "trusted", "auto", "ci",
                 "full-auto"):  # fmt: skip
        assert f"\n  {name} " in out.stdout
    assert "allow/ask/ask" in out.stdout


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--max-iterations", "0"], "--max-iterations"),
        (["--profile", "reckless"], "--profile"),
        (["-m", "nosuch:model"], "--model"),
        (["-m", "{not json"], "--model"),
        (["-m", "client"], "--model"),
        (["-m", "@missing.json"], "--model"),
        (["--workspace", "nowhere"], "--workspace"),
        (["--continue"], "--continue"),
    ],
)
def test_usage_errors_name_the_flag_and_exit_2(tmp_path: Path, args: list[str], flag: str) -> None:
    model = [] if "-m" in args else ["-m", script_file(tmp_path, {"content": "x"})]
    out = cli(tmp_path, "run", *model, *args, "--state-dir", str(tmp_path / "s"), "go")
    assert out.returncode == 2, out.stderr
    assert flag in out.stderr
    assert not any(field in out.stderr for field in FIELDS)
    assert "Traceback" not in out.stderr


def test_without_a_model_the_error_says_how_to_set_one(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", "go", "--state-dir", str(tmp_path / "s"))
    assert out.returncode == 2
    for way in ("--model", "CLEVERAGENTS_MODEL", "config.toml"):
        assert way in out.stderr


def test_home_and_root_are_refused_unless_named_by_workspace(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    model = script_file(tmp_path, {"content": "fine"})
    refused = cli(tmp_path, "run", "-m", model, "go", cwd=home, HOME=str(home))
    root = cli(tmp_path, "run", "-m", model, "go", cwd=Path("/"))
    named = cli(tmp_path, "run", "-m", model, "--workspace", str(home), "go",
                "--state-dir", str(tmp_path / "s"), cwd=home, HOME=str(home))  # fmt: skip
    assert refused.returncode == root.returncode == 2
    assert "--workspace" in refused.stderr
    assert "--workspace /" in root.stderr
    assert named.returncode == 0, named.stderr


def test_the_prompt_comes_from_stdin_when_piped_or_dash(tmp_path: Path) -> None:
    state = tmp_path / "state"
    model = script_file(tmp_path, {"content": "ok"})
    assert cli(tmp_path, "run", "-m", model, "--state-dir", str(state),
               input="from a pipe\n").returncode == 0  # fmt: skip
    assert cli(tmp_path, "run", "-m", model, "--state-dir", str(state), "-",
               input="from a dash").returncode == 0  # fmt: skip
    prompts = {meta(state, r["runId"])["prompt"] for r in runs(state)}
    assert prompts == {"from a pipe\n", "from a dash"}


def test_the_model_may_be_inline_json_or_a_file_and_system_goes_with_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    spec = {"provider": "scripted", "script": [{"content": "from json"}]}
    (tmp_path / "model.json").write_text(json.dumps(spec))
    inline = cli(tmp_path, "run", "-m", json.dumps(spec), "--system", "be brief", "--json",
                 "--state-dir", str(state), "go")  # fmt: skip
    from_file = cli(tmp_path, "run", "-m", f"@{tmp_path / 'model.json'}", "--json",
                    "--state-dir", str(state), "go")  # fmt: skip
    for out in (inline, from_file):
        assert out.returncode == 0, out.stderr
        finished = json.loads(out.stdout.splitlines()[-1])
        assert finished["params"]["result"]["content"] == "from json"


def test_with_no_terminal_a_call_is_not_approved_naming_yes_and_profile(tmp_path: Path) -> None:
    """Nobody could be asked (no terminal, stdin /dev/null): the refusal is recorded as
    not approved, not as a user's decision, and one line says what to do."""
    write = {"name": "builtin/file-write", "arguments": {"path": "out.txt", "content": "x"}}
    model = script_file(tmp_path, {"toolCalls": [write]}, {"content": "done"})
    state = str(tmp_path / "state")
    refused = cli(tmp_path, "run", "-m", model, "--state-dir", state, "write")
    assert refused.returncode == 0
    [line] = [x for x in refused.stderr.splitlines() if x.startswith("not approved")]
    assert "builtin/file-write" in line
    assert "--yes" in line
    assert "--profile" in line
    assert not (tmp_path / "out.txt").exists()
    [record] = result_of(tmp_path, state)["toolCallHistory"]
    assert record["error"] == (
        "not approved: no terminal to ask (use --yes or --profile); "
        "profile 'supervised' asks before write tools"
    )
    assert "declined" not in record["error"]
    allowed = cli(tmp_path, "run", "-m", model, "--state-dir", state, "--yes", "write")
    assert allowed.returncode == 0
    assert "not approved" not in allowed.stderr
    assert (tmp_path / "out.txt").read_text() == "x"


def result_of(tmp_path: Path, state: str) -> dict[str, Any]:
    """The newest run's ``RunResult``, as ``runs show --json`` prints it."""
    shown = cli(tmp_path, "runs", "show", runs(Path(state))[0]["runId"], "--json",
                "--state-dir", state)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    result: dict[str, Any] = json.loads(shown.stdout)
    return result


def test_a_run_stopped_by_the_limit_says_so_and_exits_1(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "still going",
                                   "toolCalls": [{"name": "builtin/file-list", "arguments": {}}]})  # fmt: skip
    out = cli(tmp_path, "run", "-m", model, "--max-iterations", "2",
              "--state-dir", str(tmp_path / "s"), "go")  # fmt: skip
    assert out.returncode == 1
    assert "stopped at the iteration limit: 2 iterations" in out.stderr
    assert "not an answer" in out.stderr


def test_demo_on_a_missing_workspace_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    missing = cli(tmp_path, "demo", "--workspace", str(tmp_path / "nonexistent"))
    assert missing.returncode == 2
    assert missing.stderr == (
        f"cleveragents demo: --workspace {tmp_path / 'nonexistent'} is not a directory\n"
    )
    (tmp_path / "empty").mkdir()
    empty = cli(tmp_path, "demo", "--workspace", str(tmp_path / "empty"))
    assert empty.returncode == 2
    [line] = empty.stderr.splitlines()
    assert "src/greet.py" in line


@pytest.mark.parametrize("level", ["verbose", "5", ""])
def test_serve_refuses_an_unknown_log_level_naming_the_flag(tmp_path: Path, level: str) -> None:
    out = cli(tmp_path, "serve", "--log-level", level)
    assert out.returncode == 2
    assert "--log-level" in out.stderr
    assert "DEBUG, INFO, WARNING, ERROR, CRITICAL" in out.stderr
    assert "Traceback" not in out.stderr
