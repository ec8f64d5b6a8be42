"""``cleveragents`` in a pipeline: a piped stdin goes to the model with the prompt, stdout
off a terminal holds the answer alone (the rest goes to stderr), ``-o`` writes the answer
to a file, and every command ends quietly when its stdout is closed early."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_kit import openai_model, openai_text

from cleveragents.cli import with_input
from kit.cli import COMMAND, clean_env, cli, meta, runs, workspace
from kit.loopback import LoopbackServer
from kit.models import call, script_file

DIFF = "diff --git a/x.py b/x.py\n-print('helo')\n+print('hello')\n"


def test_a_piped_stdin_reaches_the_model_after_the_prompt(tmp_path: Path) -> None:
    """``git diff | cleveragents run -m M "review this"`` sends both, as one message."""
    with LoopbackServer() as server:
        server.queue(openai_text("Looks right."))
        out = cli(tmp_path, "run", "-m", openai_model(server), "--state-dir",
                  str(tmp_path / "state"), "review this", input=DIFF,
                  cwd=workspace(tmp_path), OPENAI_API_KEY="unused")  # fmt: skip
    assert out.returncode == 0, out.stderr
    [request] = server.requests
    user = request.body["messages"][-1]
    assert user == {"role": "user", "content": f"review this\n\n```\n{DIFF}```"}
    assert out.stdout == "Looks right.\n"


def test_stdin_alone_is_the_prompt_and_an_empty_pipe_adds_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    model = script_file(tmp_path, {"content": "ok"})
    assert cli(tmp_path, "run", "-m", model, "--state-dir", str(state),
               input="the whole prompt\n").returncode == 0  # fmt: skip
    assert cli(tmp_path, "run", "-m", model, "--state-dir", str(state), "just this",
               input="").returncode == 0  # fmt: skip
    prompts = [meta(state, r["runId"])["prompt"] for r in runs(state)]
    assert sorted(prompts) == ["just this", "the whole prompt\n"]


def test_the_fence_is_longer_than_any_backtick_run_in_the_input() -> None:
    text = "a markdown file\n```python\nx = 1\n```\n"
    assert with_input("review", text) == f"review\n\n````\n{text}````"
    assert with_input("p", "no fences\n\n") == "p\n\n```\nno fences\n```"


def test_stdin_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "ok"})
    out = subprocess.run(
        [*COMMAND, "run", "-m", model, "--state-dir", str(tmp_path / "s"), "go"],
        input=b"caf\xe9", capture_output=True, timeout=60, env=clean_env(tmp_path),
        cwd=workspace(tmp_path), start_new_session=True,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.decode() == "cleveragents run: stdin is not UTF-8 text (byte 3 is not)\n"


def test_off_a_terminal_stdout_is_the_answer_alone(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "Listing the files.",
                                   "toolCalls": [call("builtin/file-list")]},
                        {"content": "There are no files.\nNone at all."})  # fmt: skip
    out = cli(tmp_path, "run", "-m", model, "--state-dir", str(tmp_path / "state"), "list",
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == "There are no files.\nNone at all.\n"
    # Everything else, on stderr, in order: the header, what the model said before its
    # calls, the calls, the summary.
    err = out.stderr
    order = [err.index(x) for x in ("run ", "Listing the files.", "started builtin/file-list",
                                    "ok      builtin/file-list", "completed: 2 iterations")]  # fmt: skip
    assert order == sorted(order)
    assert "There are no files." not in err


@pytest.mark.parametrize("json_lines", [False, True])
def test_output_last_message_writes_the_answer_to_a_file(tmp_path: Path, json_lines: bool) -> None:
    model = script_file(tmp_path, {"content": "Looking.", "toolCalls": [call("builtin/file-list")]},
                        {"content": "The answer."})  # fmt: skip
    answer = tmp_path / "answer.txt"
    out = cli(tmp_path, "run", "-m", model, "--state-dir", str(tmp_path / "state"), "go",
              "-o", str(answer), *(["--json"] if json_lines else []),
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert answer.read_text() == "The answer."
    if json_lines:  # stdout is unchanged: the notifications
        assert json.loads(out.stdout.splitlines()[-1])["method"] == "run/finished"
    long_form = cli(tmp_path, "run", "-m", model, "--state-dir", str(tmp_path / "state"), "go",
                    "--output-last-message", str(tmp_path / "again.txt"))  # fmt: skip
    assert long_form.returncode == 0
    assert (tmp_path / "again.txt").read_text() == "The answer."


def test_output_last_message_in_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "x"})
    out = cli(tmp_path, "run", "-m", model, "--state-dir", str(tmp_path / "s"), "go",
              "-o", str(tmp_path / "nowhere" / "a.txt"))  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith("cleveragents run: -o ")
    assert "is not a directory" in out.stderr
    assert runs(tmp_path / "s") == []


@pytest.mark.parametrize(
    "args",
    [("runs", "list", "--json"), ("runs", "list"), ("runs", "show", "RUN", "--json"),
     ("runs", "show", "RUN"), ("config", "--json"), ("config",), ("models",),
     ("models", "--json"), ("keys", "list")],
)  # fmt: skip
def test_every_command_ends_quietly_when_its_stdout_is_closed(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """``cleveragents runs list --json | head -1``: the reader leaves before the command
    writes; no traceback, and 141 (as for SIGPIPE), or 0 when all it wrote fit the pipe
    before the reader left."""
    state = tmp_path / "state"
    model = script_file(tmp_path, {"content": "x" * 5000})
    assert cli(tmp_path, "run", "-m", model, "--state-dir", str(state), "go").returncode == 0
    run_id = runs(state)[0]["runId"]
    argv = [a.replace("RUN", run_id) for a in args]
    if args[0] == "runs":
        argv += ["--state-dir", str(state)]
    process = subprocess.Popen([*COMMAND, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, env=clean_env(tmp_path),
                               start_new_session=True)  # fmt: skip
    assert process.stdout is not None
    process.stdout.close()  # before it wrote anything: it starts in tens of milliseconds
    _, stderr = process.communicate(timeout=60)
    assert process.returncode in (0, 141)
    assert stderr == b""
