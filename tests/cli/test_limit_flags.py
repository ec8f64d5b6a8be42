"""``cleveragents run --max-tool-calls N``, ``--deadline TIME`` and ``--max-tokens N``:
each ends the run at its limit (status ``limit``, exit 1) and the summary says which, in
words, with the flag that moves it; bad values are usage errors naming the flag."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from cleveragents._cli_parser import duration_seconds
from cleveragents.client._live import LiveView
from cleveragents.client._views import Output
from cleveragents.transcripts import TranscriptStore
from kit.cli import cli, runs, workspace
from kit.models import call, script_file, shell


def run(tmp_path: Path, model: str, *flags: str) -> tuple[int, str, dict[str, object]]:
    """The exit code, stderr and the transcript's result of ``run --yes FLAGS go``."""
    state = tmp_path / "state"
    out = cli(tmp_path, "run", "-m", model, "--state-dir", str(state), "--yes", *flags, "go",
              cwd=workspace(tmp_path))  # fmt: skip
    [summary] = runs(state)
    return out.returncode, out.stderr, TranscriptStore(state).result(summary["runId"])


def test_max_tool_calls_ends_the_run_and_the_summary_names_it(tmp_path: Path) -> None:
    listing = {"content": "Listing.", "toolCalls": [call("builtin/file-list")] * 2}
    model = script_file(tmp_path, listing, listing, {"content": "never"})
    code, err, result = run(tmp_path, model, "--max-tool-calls", "3")
    assert code == 1
    assert result["status"] == "limit"
    assert result["limitReason"] == "toolCalls"
    assert "stopped at the tool-call limit: " in err
    assert "Raise --max-tool-calls" in err
    shown = cli(
        tmp_path, "runs", "show", str(result["runId"]), "--state-dir", str(tmp_path / "state")
    )
    assert "status      limit (stopped at the tool-call limit)\n" in shown.stdout


def test_max_tokens_ends_the_run_once_the_usage_reaches_it(tmp_path: Path) -> None:
    turn = {"content": "Working.", "toolCalls": [call("builtin/file-list")],
            "usage": {"inputTokens": 400, "outputTokens": 100}}  # fmt: skip
    model = script_file(tmp_path, turn, turn, turn, {"content": "never"})
    code, err, result = run(tmp_path, model, "--max-tokens", "1000")
    assert code == 1
    assert result["limitReason"] == "tokens"
    assert result["iterations"] == 2  # 500, then 1,000 tokens: reached
    assert "stopped at the token limit: " in err
    assert "Raise --max-tokens" in err


def test_the_deadline_cancels_the_call_in_flight_and_names_itself(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "Waiting.", "toolCalls": [shell("sleep 60")]},
                        {"content": "never"})  # fmt: skip
    code, err, result = run(tmp_path, model, "--deadline", "1s")
    assert code == 1
    assert result["limitReason"] == "deadline"
    assert "stopped at the deadline: " in err
    assert "--deadline" in err


def test_json_shows_the_limit_reason_on_the_wire(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "x", "toolCalls": [call("builtin/file-list")] * 3})
    out = cli(tmp_path, "run", "-m", model, "--state-dir", str(tmp_path / "state"), "--yes",
              "--json", "--max-tool-calls", "1", "go", cwd=workspace(tmp_path))  # fmt: skip
    finished = json.loads(out.stdout.splitlines()[-1])
    assert finished["method"] == "run/finished"
    assert finished["params"]["result"]["limitReason"] == "toolCalls"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("1.5m", 90.0), ("5m", 300.0), ("1h", 3600.0),
     ("1h30m", 5400.0), ("2m30s", 150.0), (" 45S ", 45.0), ("0.5", 0.5)],
)  # fmt: skip
def test_deadline_durations(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0s", "-5", "5x", "m", "1h-30m", "1.2.3s", "5 m"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration_seconds(text)


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [("--deadline", "soon", "argument --deadline: expected a duration such as 90"),
     ("--max-tool-calls", "0", "argument --max-tool-calls: must be at least 1"),
     ("--max-tokens", "lots", "argument --max-tokens: expected a whole number")],
)  # fmt: skip
def test_bad_limit_values_are_usage_errors_naming_the_flag(
    tmp_path: Path, flag: str, value: str, says: str
) -> None:
    model = script_file(tmp_path, {"content": "ok"})
    out = cli(tmp_path, "run", "-m", model, "--state-dir", str(tmp_path / "state"), flag, value,
              "go", cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 2
    assert says in out.stderr
    assert not (tmp_path / "state").exists() or runs(tmp_path / "state") == []


@pytest.mark.parametrize(
    ("reason", "words"),
    [("iterations", "■ stopped at the iteration limit"), ("toolCalls", "■ stopped at the tool-call limit"),
     ("deadline", "■ stopped at the deadline"), ("tokens", "■ stopped at the token limit"),
     (None, "■ stopped at the iteration limit")],  # a result from before limitReason
)  # fmt: skip
def test_the_live_view_s_summary_names_the_limit(reason: str | None, words: str) -> None:
    stream = io.StringIO()
    view = LiveView(Output(stream))
    result = {"runId": "r", "status": "limit", "content": "so far", "iterations": 2,
              "durationMs": 10.0, **({"limitReason": reason} if reason else {})}  # fmt: skip
    view.finish(result, None)
    assert f"{words} · 2 iterations" in stream.getvalue()
