"""What ``cleveragents run`` shows of a model's reasoning and of its context: reasoning
dimmed before the text it preceded on a terminal, on stderr off one (never in the
answer), hidden by ``--no-reasoning``, made inert like the text; the context's use as a
percentage and a line when the run compacts; ``--json`` unchanged."""

from __future__ import annotations

import io
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from cli_kit import Screen

from cleveragents.client._live import LiveView
from cleveragents.client._views import AnswerView, Output, View
from kit.cli import clean_env, cli, workspace
from kit.models import call, shell

CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HOSTILE = "\x1b]0;title\x07\x1b]52;c;ZWNobw==\x1b\\\x1b[2J\x9b1;1H\r"
THOUGHT = "The user wants the files listed; file-list does that."
SAID = "Listing the files."
ANSWER = "There are eight files."
COLUMNS = 100


def spec_file(tmp_path: Path, *turns: dict[str, Any], window: int | None = None) -> str:
    """``-m @FILE`` for scripted turns (with a context window when given)."""
    spec: dict[str, Any] = {"provider": "scripted", "script": list(turns)}
    if window is not None:
        spec["contextWindow"] = window
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return f"@{path}"


def two_turns(tmp_path: Path) -> str:
    return spec_file(
        tmp_path,
        {"reasoning": THOUGHT, "content": SAID, "toolCalls": [call("builtin/file-list")]},
        {"reasoning": "Eight entries came back.", "content": ANSWER},
    )


def run_args(tmp_path: Path, model: str, *extra: str) -> list[str]:
    return ["run", "-m", model, "--state-dir", str(tmp_path / "state"), "--yes", *extra, "list"]


# -- on a terminal ---------------------------------------------------------------------


def on_terminal(tmp_path: Path, args: list[str], **env: str) -> tuple[int, Screen]:
    """``cleveragents ARGS`` on a pseudo-terminal, to its end: its exit code and screen."""
    command = shlex.join([sys.executable, "-m", "cleveragents", *args])
    screen = Screen(COLUMNS, 60)
    child = pexpect.spawn(
        "/bin/sh", ["-c", f"exec {command}"], cwd=str(workspace(tmp_path)),
        env=clean_env(tmp_path, **env), encoding="utf-8", dimensions=(60, COLUMNS), timeout=20,
    )  # fmt: skip
    child.logfile_read = screen
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return int(child.exitstatus or 0), screen


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_on_a_terminal_reasoning_is_dimmed_and_comes_before_its_text(tmp_path: Path) -> None:
    code, screen = on_terminal(tmp_path, run_args(tmp_path, two_turns(tmp_path)))
    assert code == 0
    lines = screen.lines()
    order = [lines.index(x) for x in (THOUGHT, SAID, "Eight entries came back.", ANSWER)]
    assert order == sorted(order)
    raw = screen.raw.getvalue()
    # Set apart by the dim attribute (SGR 2) the terminal renders it with; the text not.
    assert re.search(r"\x1b\[2m" + re.escape(THOUGHT), raw)
    assert not re.search(r"\x1b\[2m" + re.escape(SAID), raw)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_no_reasoning_hides_it_on_a_terminal(tmp_path: Path) -> None:
    code, screen = on_terminal(tmp_path, run_args(tmp_path, two_turns(tmp_path), "--no-reasoning"))
    assert code == 0
    lines = screen.lines()
    assert SAID in lines
    assert ANSWER in lines
    assert THOUGHT not in screen.raw.getvalue()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_the_live_view_shows_context_use_while_the_run_goes_on(tmp_path: Path) -> None:
    """The status line says how full the context is after the first iteration (871 of
    2,000 tokens by the scripted model's estimate of this conversation: 44%)."""
    model = spec_file(
        tmp_path,
        {"content": "First.", "toolCalls": [call("builtin/file-list")]},
        {"content": "Now a slow one.", "toolCalls": [shell("sleep 30")]},
        window=2000,
    )
    command = shlex.join([sys.executable, "-m", "cleveragents", *run_args(tmp_path, model)])
    screen = Screen(COLUMNS, 60)
    child = pexpect.spawn(
        "/bin/sh", ["-c", f"exec {command}"], cwd=str(workspace(tmp_path)),
        env=clean_env(tmp_path), encoding="utf-8", dimensions=(60, COLUMNS), timeout=20,
    )  # fmt: skip
    child.logfile_read = screen
    try:
        child.expect(r"iteration 2/25 · [^\r\n]*· context \d+%")  # the region's status line
        head = next(line for line in screen.lines() if "iteration 2/25" in line)
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    percent = int(re.search(r"context (\d+)%", head).group(1))  # type: ignore[union-attr]
    assert 1 <= percent <= 100


# -- off a terminal --------------------------------------------------------------------


def test_off_a_terminal_reasoning_goes_to_stderr_and_never_into_the_answer(
    tmp_path: Path,
) -> None:
    out = cli(tmp_path, *run_args(tmp_path, two_turns(tmp_path)), cwd=workspace(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"
    err = out.stderr
    assert f"┆ {THOUGHT}\n" in err
    assert "┆ Eight entries came back.\n" in err  # the last iteration's too, on stderr
    assert err.index(THOUGHT) < err.index(SAID)


def test_no_reasoning_hides_it_off_a_terminal(tmp_path: Path) -> None:
    out = cli(tmp_path, *run_args(tmp_path, two_turns(tmp_path), "--no-reasoning"),
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"
    assert THOUGHT not in out.stderr
    assert "┆" not in out.stderr


def test_json_carries_the_reasoning_notifications_unchanged(tmp_path: Path) -> None:
    out = cli(tmp_path, *run_args(tmp_path, two_turns(tmp_path), "--json", "--no-reasoning"),
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    methods = [line["method"] for line in lines]
    first = methods.index("run/reasoningDelta")
    assert methods[first + 1] == "run/messageDelta"  # in order with the text
    assert lines[first]["params"]["text"] == THOUGHT
    assert out.stderr == ""


def test_a_compaction_and_the_context_use_are_lines_of_the_plain_view(tmp_path: Path) -> None:
    """A window of 2,000 tokens and turns that report 1,900 input tokens: the run
    compacts before its last call and says so, and each iteration's use is a line."""
    model = spec_file(
        tmp_path,
        *({"content": f"Step {n}.", "toolCalls": [call("builtin/file-list")],
           "usage": {"inputTokens": 600 * n, "outputTokens": 10}} for n in (1, 2, 3)),
        {"content": "Done.", "usage": {"inputTokens": 1900, "outputTokens": 10}},
        window=2000,
    )  # fmt: skip
    for n in range(8):
        (workspace(tmp_path) / f"f{n}.txt").write_text("x" * 3000)
    out = cli(tmp_path, *run_args(tmp_path, model), cwd=workspace(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Done.\n"
    compacted = re.findall(r"^  context compacted \((.+)\): ([\d,]+) → ([\d,]+) tokens", out.stderr,
                           re.M)  # fmt: skip
    assert compacted, out.stderr
    for _how, before, after in compacted:
        assert int(after.replace(",", "")) < int(before.replace(",", ""))
    uses = re.findall(r"^  context (\d+)% \(([\d,]+) / 2,000 tokens\)$", out.stderr, re.M)
    assert len(uses) == 4  # one per iteration


def test_no_context_line_when_the_window_is_not_known(tmp_path: Path) -> None:
    out = cli(tmp_path, *run_args(tmp_path, two_turns(tmp_path)), cwd=workspace(tmp_path))
    assert out.returncode == 0, out.stderr
    assert not re.search(r"^  context ", out.stderr, re.M)


# -- in process: hostile reasoning -----------------------------------------------------


def reasoning_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("run/started", {"runId": "r", "seq": 1, "sandboxRoot": "/w", "maxIterations": 2,
                         "tools": []}),
        ("run/reasoningDelta", {"runId": "r", "seq": 2, "iteration": 1, "text": text}),
        ("run/messageDelta", {"runId": "r", "seq": 3, "iteration": 1, "text": "Hi."}),
        ("run/compacted", {"runId": "r", "seq": 4, "iteration": 1, "strategy": f"x{HOSTILE}",
                           "tokensBefore": 10, "tokensAfter": 5, "messagesRemoved": 1}),
        ("run/iteration", {"runId": "r", "seq": 5, "iteration": 1, "content": "Hi.",
                           "toolCallCount": 0, "durationMs": 1.0, "contextTokens": 5,
                           "contextWindow": 10}),
    ]  # fmt: skip


def test_hostile_reasoning_reaches_no_view_raw() -> None:
    thought = f"Plan{HOSTILE}: read\x1b[1A the file."
    live_out, plain_out, plain_err, answer, answer_err = (io.StringIO() for _ in range(5))
    live = LiveView(Output(live_out))
    plain = View(Output(plain_out), Output(plain_err))
    piped = AnswerView(Output(answer), Output(answer_err))
    live.start()
    for view in (live, plain, piped):
        for method, params in reasoning_events(thought):
            view.event(method, params)
        view.finish({"runId": "r", "status": "completed", "content": "Hi.", "iterations": 1,
                     "durationMs": 1.0}, None)  # fmt: skip
    for stream in (plain_out, plain_err, answer, answer_err):
        assert not CONTROLS.findall(stream.getvalue())
    # rich writes its own SGR sequences; nothing else of the model's may remain.
    shown = re.sub(r"\x1b\[[\d;]*m", "", live_out.getvalue())
    assert not CONTROLS.findall(shown.replace("\r", "").replace("\x1b[?25l", "")
                                .replace("\x1b[?25h", "").replace("\x1b[2K", "")
                                .replace("\x1b[1A", ""))  # fmt: skip
    assert "Plan: read the file." in shown
    assert "┆ Plan: read the file.\n" in plain_err.getvalue()  # stderr, marked
    assert "Plan" not in plain_out.getvalue()
    assert answer.getvalue() == "Hi.\n"  # the answer alone
    assert "context 50% (5 / 10 tokens)" in answer_err.getvalue()
