"""Checkpoints on the command line: each run ends with a diffstat of what it changed;
``runs diff`` shows it again (coloured only on a terminal), ``runs revert`` puts it back
(refusing a user's later edit unless ``--force``, exit 3), ``runs restore`` undoes the
revert, and ``run --fork ID[@K]`` starts from an earlier run's iteration."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pexpect
import pytest

from cleveragents.checkpoints import DiffResult
from cleveragents.client._changes import patch_lines
from kit.cli import clean_env, cli, runs, workspace
from kit.models import call, script_file, shell

ESCAPE = re.compile(r"\x1b")
EXIT_CONFLICTS = 3


def editing(tmp_path: Path, *extra: str) -> tuple[Path, str]:
    """One run in ``tmp_path/ws`` that edits a file with the shell, creates one with the
    file tool and removes one: its workspace and what it wrote on stderr."""
    ws = workspace(tmp_path)
    (ws / "a.txt").write_text("line1\nline2\n")
    (ws / "gone.txt").write_text("bye\n")
    model = script_file(tmp_path, {"content": "Editing.", "toolCalls": [
        call("builtin/file-write", path="new.txt", content="hello\nworld\n"),
        shell("sed -i s/line1/LINE1/ a.txt && rm gone.txt")]},
        {"content": "Done."})  # fmt: skip
    out = cli(tmp_path, "run", "go", "-y", "-m", model, "--state-dir", str(tmp_path / "state"),
              *extra, cwd=ws)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Done.\n"  # off a terminal, stdout is the answer alone
    return ws, out.stderr


def edit_run(tmp_path: Path, *extra: str) -> tuple[Path, str]:
    """:func:`editing`'s workspace and the run's id."""
    ws, _ = editing(tmp_path, *extra)
    return ws, str(runs(tmp_path / "state")[0]["runId"])


def test_a_run_ends_with_a_diffstat_of_what_it_changed_on_stderr_off_a_terminal(
    tmp_path: Path,
) -> None:
    _, stderr = editing(tmp_path)
    tail = stderr.splitlines()[-4:]
    assert tail == [
        " a.txt    | 2 +-",
        " gone.txt | 1 - (gone)",
        " new.txt  | 2 ++ (new)",
        " 3 files changed, 3 insertions(+), 2 deletions(-)",
    ]


def test_a_run_that_changes_nothing_prints_no_diffstat(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    model = script_file(tmp_path, {"content": "Looking.", "toolCalls": [
        call("builtin/file-list")]}, {"content": "Nothing to do."})  # fmt: skip
    out = cli(tmp_path, "run", "go", "-m", model, "--state-dir", str(tmp_path / "state"), cwd=ws)
    assert out.returncode == 0, out.stderr
    assert "changed" not in out.stderr


def test_json_and_no_checkpoints_print_no_diffstat_and_no_checkpoints_keeps_none(
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path)
    model = script_file(tmp_path, {"content": "Writing.", "toolCalls": [
        call("builtin/file-write", path="n.txt", content="x\n")]}, {"content": "ok"})  # fmt: skip
    state = str(tmp_path / "state")
    out = cli(tmp_path, "run", "go", "-y", "--json", "-m", model, "--state-dir", state, cwd=ws)
    assert out.returncode == 0, out.stderr
    methods = [json.loads(line)["method"] for line in out.stdout.splitlines()]
    assert "run/checkpoint" in methods  # the wire says so; the diffstat is not printed
    assert "file changed" not in out.stdout + out.stderr
    out = cli(tmp_path, "run", "go", "-y", "--no-checkpoints", "-m", model, "--state-dir",
              state, cwd=ws)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "file changed" not in out.stderr
    latest = str(runs(tmp_path / "state")[0]["runId"])
    shown = cli(tmp_path, "runs", "diff", latest, "--state-dir", state)
    assert shown.stdout == "no files changed\n"


def test_runs_diff_takes_a_prefix_and_prints_the_stat_and_a_plain_patch_in_a_pipe(
    tmp_path: Path,
) -> None:
    _, run_id = edit_run(tmp_path)
    out = cli(tmp_path, "runs", "diff", run_id[:6], "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 0, out.stderr
    assert not ESCAPE.search(out.stdout)
    assert " 3 files changed, 3 insertions(+), 2 deletions(-)" in out.stdout
    assert "diff --git a/a.txt b/a.txt\n" in out.stdout
    assert "-line1\n+LINE1\n line2\n" in out.stdout
    assert "deleted file mode 100644" in out.stdout
    only = cli(tmp_path, "runs", "diff", run_id, "--iteration", "1", "--stat", "--state-dir",
               str(tmp_path / "state"))  # fmt: skip
    assert only.stdout.splitlines()[-1] == " 3 files changed, 3 insertions(+), 2 deletions(-)"
    assert "diff --git" not in only.stdout
    unknown = cli(tmp_path, "runs", "diff", "ffffffff", "--state-dir", str(tmp_path / "state"))
    assert unknown.returncode == 1
    assert "unknown run 'ffffffff'" in unknown.stderr


def test_the_patch_is_coloured_as_git_colours_it_on_a_terminal_and_stays_inert() -> None:
    diff = DiffResult(
        (), "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\x1b]0;t\x07\n+new\n"
    )
    coloured = patch_lines(diff, colour=True)
    assert coloured[1] == "\x1b[1m--- a/x\x1b[0m"
    assert coloured[2] == "\x1b[1m+++ b/x\x1b[0m"  # a header, not an addition
    assert coloured[3].startswith("\x1b[36m@@")
    assert coloured[4] == "\x1b[31m-old\x1b[0m"  # the file's own escape removed
    assert coloured[5] == "\x1b[32m+new\x1b[0m"
    assert patch_lines(diff, colour=False)[4] == "-old"


def test_a_revert_refuses_a_later_user_edit_then_force_applies_and_restore_undoes_it(
    tmp_path: Path,
) -> None:
    ws, run_id = edit_run(tmp_path)
    state = str(tmp_path / "state")
    (ws / "a.txt").write_text("LINE1\nline2\nthe user's own line\n")
    refused = cli(tmp_path, "runs", "revert", run_id[:8], "--state-dir", state)
    assert refused.returncode == EXIT_CONFLICTS
    assert "refused, nothing was changed" in refused.stdout
    assert "  a.txt: changed after checkpoint" in refused.stdout
    assert "--force" in refused.stdout
    assert (ws / "new.txt").exists()  # nothing changed
    assert not (ws / "gone.txt").exists()

    later = cli(tmp_path, "runs", "revert", run_id, "--to-iteration", "1", "--state-dir", state)
    assert later.returncode == 0, later.stderr  # after iteration 1: its only change stays
    assert "nothing to do" in later.stdout
    dry = cli(tmp_path, "runs", "revert", run_id, "--dry-run", "--force", "--state-dir", state)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "dry run: nothing was changed" in dry.stdout
    assert (ws / "new.txt").exists()

    done = cli(tmp_path, "runs", "revert", run_id, "--force", "--state-dir", state)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ws / "a.txt").read_text() == "line1\nline2\n"
    assert (ws / "gone.txt").read_text() == "bye\n"
    assert not (ws / "new.txt").exists()
    assert "  restored  a.txt" in done.stdout
    assert "  created   gone.txt" in done.stdout
    assert "  deleted   new.txt" in done.stdout
    [undo] = re.findall(r"undo it: (cleveragents runs restore [0-9a-f]{16} --workspace \S+)",
                        done.stdout)  # fmt: skip
    assert undo.endswith(str(ws))

    checkpoint = undo.split()[3]
    found = cli(tmp_path, "runs", "restore", checkpoint, "--dry-run", "--state-dir", state)
    assert found.returncode == 0, found.stderr  # without --workspace: the store holding it
    assert "dry run: nothing was changed" in found.stdout
    assert "would restore 1 file, create 1 file, delete 1 file" in found.stdout
    again = cli(tmp_path, *undo.split()[1:], "--state-dir", state)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (ws / "a.txt").read_text() == "LINE1\nline2\nthe user's own line\n"
    assert (ws / "new.txt").read_text() == "hello\nworld\n"
    assert not (ws / "gone.txt").exists()


def test_a_dry_run_that_would_be_refused_exits_3_and_restore_of_an_unknown_checkpoint_1(
    tmp_path: Path,
) -> None:
    ws, run_id = edit_run(tmp_path)
    state = str(tmp_path / "state")
    (ws / "new.txt").write_text("mine now\n")
    dry = cli(tmp_path, "runs", "revert", run_id, "--dry-run", "--state-dir", state)
    assert dry.returncode == EXIT_CONFLICTS
    assert "  new.txt: changed after checkpoint" in dry.stdout
    assert (ws / "new.txt").read_text() == "mine now\n"
    unknown = cli(tmp_path, "runs", "restore", "0123456789abcdef", "--workspace", str(ws),
                  "--state-dir", state)  # fmt: skip
    assert unknown.returncode == 1
    assert "0123456789abcdef" in unknown.stderr


def test_fork_starts_from_an_iteration_and_restore_files_puts_them_back_first(
    tmp_path: Path,
) -> None:
    ws, run_id = edit_run(tmp_path)
    state = str(tmp_path / "state")
    bad = cli(tmp_path, "run", "--fork", f"{run_id[:8]}@7", "again", "--state-dir", state, cwd=ws)
    assert bad.returncode == 2
    assert "has 2 iterations, not 7" in bad.stderr

    (ws / "a.txt").write_text("edited by the user\n")
    refused = cli(tmp_path, "run", "--fork", f"{run_id[:8]}@0", "--restore-files", "again",
                  "--state-dir", state, cwd=ws)  # fmt: skip
    assert refused.returncode == EXIT_CONFLICTS
    assert "a.txt" in refused.stderr
    assert (ws / "a.txt").read_text() == "edited by the user\n"

    (ws / "a.txt").write_text("LINE1\nline2\n")  # as the run left it
    model = script_file(tmp_path, {"content": "Forked."}, name="fork.json")
    forked = cli(tmp_path, "run", "--fork", f"{run_id}@0", "--restore-files", "-m", model,
                 "again", "--state-dir", state, cwd=ws)  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout == "Forked.\n"
    assert (ws / "a.txt").read_text() == "line1\nline2\n"  # as before the first run
    assert not (ws / "new.txt").exists()
    assert len(runs(tmp_path / "state")) == 2


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_on_a_terminal_the_run_s_diffstat_and_runs_diff_are_coloured(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "a.txt").write_text("line1\nline2\n")
    model = script_file(tmp_path, {"content": "Editing.", "toolCalls": [
        shell("sed -i s/line1/LINE1/ a.txt")]}, {"content": "Done."})  # fmt: skip
    state = str(tmp_path / "state")

    def on_pty(*args: str) -> str:
        child = pexpect.spawn(
            sys.executable, ["-m", "cleveragents", *args, "--state-dir", state], cwd=str(ws),
            env=clean_env(tmp_path), encoding="utf-8", dimensions=(40, 100), timeout=20,
        )  # fmt: skip
        try:
            child.expect(pexpect.EOF)
            output = str(child.before)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0, output
        return output

    shown = on_pty("run", "-y", "-m", model, "go")
    # The live view's diffstat: the graph in git's colours, after the summary.
    assert re.search(r"a\.txt \| 2 \x1b\[[0-9;]*32m\+\x1b\[[0-9;]*m\x1b\[[0-9;]*31m-", shown)
    assert shown.index("completed") < shown.index("1 file changed")
    run_id = str(runs(tmp_path / "state")[0]["runId"])
    patch = on_pty("runs", "diff", run_id[:6])
    assert "\x1b[31m-line1\x1b[0m" in patch
    assert "\x1b[32m+LINE1\x1b[0m" in patch
    assert "\x1b[36m@@ -1,2 +1,2 @@\x1b[0m" in patch
