"""``cleveragents run --continue``: its flags in any order; the continued run's model,
profile and workspace reused unless given; and a run id's unique prefix (4 characters
or more) wherever an id is taken, an ambiguous one listing the candidates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cleveragents.transcripts import META, TranscriptStore
from kit.cli import cli, meta, runs, workspace
from kit.models import script_file


def first_run(tmp_path: Path, *args: str) -> tuple[str, str]:
    """One finished run in ``tmp_path/ws``; its model spec and its id."""
    model = script_file(tmp_path, {"content": "first answer"})
    out = cli(tmp_path, "run", "-m", model, "--state-dir", str(tmp_path / "state"), *args,
              "first", cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    return model, runs(tmp_path / "state")[0]["runId"]


@pytest.mark.parametrize(
    "order",
    [
        ["--continue", "ID", "-m", "M", "PROMPT"],
        ["-m", "M", "--continue", "ID", "PROMPT"],
        ["--continue", "-m", "M", "ID", "PROMPT"],
        ["ID", "-m", "M", "PROMPT", "--continue"],
        ["ID", "PROMPT", "--continue"],  # the model: the continued run's
        ["--continue", "PROMPT"],  # the run: the latest in this workspace
        ["PROMPT", "--continue", "-m", "M"],
    ],
    ids=lambda order: " ".join(order),
)
def test_continue_takes_its_flags_and_words_in_any_order(tmp_path: Path, order: list[str]) -> None:
    model, run_id = first_run(tmp_path)
    state = str(tmp_path / "state")
    words = {"ID": run_id[:6], "M": model, "PROMPT": "And what else?"}
    out = cli(tmp_path, "run", "--state-dir", state, *[words.get(w, w) for w in order],
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    second = runs(tmp_path / "state")[0]["runId"]
    assert meta(tmp_path / "state", second)["continueFrom"] == run_id
    assert meta(tmp_path / "state", second)["prompt"] == "And what else?"
    assert out.stdout == "first answer\n"  # the script's one turn, again


def test_the_continued_run_s_model_profile_and_workspace_are_reused(tmp_path: Path) -> None:
    model, run_id = first_run(tmp_path, "--profile", "trusted")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = tmp_path / "state"
    # From another directory, with no model anywhere: all three come from the first run.
    out = cli(tmp_path, "run", "--state-dir", str(state), "--continue", run_id, "more",
              cwd=elsewhere)  # fmt: skip
    assert out.returncode == 0, out.stderr
    second = runs(state)[0]["runId"]
    assert meta(state, second)["model"] == model
    assert meta(state, second)["profile"] == "trusted"
    shown = cli(tmp_path, "runs", "show", second, "--state-dir", str(state)).stdout
    assert f"workspace   {workspace(tmp_path)}" in shown
    assert f"continues   {run_id}" in shown
    # What is given wins.
    other = script_file(tmp_path, {"content": "other"}, name="other.json")
    given = cli(tmp_path, "run", "--state-dir", str(state), "--continue", second, "-m", other,
                "--profile", "review", "--workspace", str(elsewhere), "again")  # fmt: skip
    assert given.returncode == 0, given.stderr
    third = runs(state)[0]["runId"]
    assert (meta(state, third)["model"], meta(state, third)["profile"]) == (other, "review")
    assert f"workspace   {elsewhere}" in cli(tmp_path, "runs", "show", third, "--state-dir",
                                              str(state)).stdout  # fmt: skip


def test_a_model_the_transcript_cannot_name_again_needs_m(tmp_path: Path) -> None:
    inline = json.dumps({"provider": "scripted", "script": [{"content": "inline"}]})
    out = cli(tmp_path, "run", "-m", inline, "--state-dir", str(tmp_path / "state"), "first",
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    again = cli(tmp_path, "run", "--state-dir", str(tmp_path / "state"), "--continue", "more",
                cwd=workspace(tmp_path))  # fmt: skip
    assert again.returncode == 2
    assert "scripted:<inline>" in again.stderr
    assert "-m/--model" in again.stderr


def planted(state: Path, *run_ids: str) -> None:
    """Finished runs with the given ids (a prefix shared on purpose)."""
    store = TranscriptStore(state)
    for number, run_id in enumerate(run_ids):
        transcript = store.claim(run_id)
        transcript.append(META, {"runId": run_id, "prompt": "p", "model": "scripted:x.json",
                                 "startedAt": f"2026-01-0{number + 1}T00:00:00.000+00:00"})  # fmt: skip
        transcript.append("run/finished", {"runId": run_id, "seq": 1, "result": {
            "runId": run_id, "status": "completed", "content": f"content of {run_id}",
            "toolCallHistory": [], "iterations": 1, "terminatedByLimit": False,
            "durationMs": 1.0}})  # fmt: skip
        transcript.close()


def test_a_unique_prefix_names_a_run_and_an_ambiguous_one_lists_the_candidates(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    planted(state, "abcd1111", "abcd2222", "abce3333")
    where = ["--state-dir", str(state)]
    unique = cli(tmp_path, "runs", "show", "abce", "--json", *where)
    assert unique.returncode == 0, unique.stderr
    assert json.loads(unique.stdout)["content"] == "content of abce3333"
    ambiguous = cli(tmp_path, "runs", "show", "abcd", *where)
    assert ambiguous.returncode == 1
    assert ambiguous.stderr == (
        "cleveragents runs show: 'abcd' is the start of 2 run ids: abcd2222, abcd1111; "
        "give more of the id\n"
    )
    short = cli(tmp_path, "runs", "show", "abc", *where)
    assert short.returncode == 1
    assert "at least 4 characters" in short.stderr
    model = script_file(tmp_path, {"content": "ok"})
    continued = cli(tmp_path, "run", "-m", model, *where, "--continue", "abcd", "go")
    assert continued.returncode == 2
    assert "abcd2222, abcd1111" in continued.stderr
    assert len(runs(state)) == 3  # refused before a run existed
    # The list shows ids as their shortest unique prefix of 8 characters or more.
    listing = cli(tmp_path, "runs", "list", *where).stdout.splitlines()
    assert [line.split()[0] for line in listing[1:]] == ["abce3333", "abcd2222", "abcd1111"]
