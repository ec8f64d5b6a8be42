"""The workspace's own repository is never read nor changed, and no ``git`` is needed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from checkpoint_kit import bytes_of, sh, state_of, write

from cleveragents.checkpoints import CheckpointStore

GIT = shutil.which("git")
GIT_ENV = "GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t"


def _repository_state(root: Path) -> dict[str, object]:
    """Every byte, mode and time under ``.git``, then what git says of the repository
    (without its optional locks: ``git status`` would otherwise refresh the index)."""
    said: dict[str, object] = {"bytes": bytes_of(root / ".git")}
    if GIT is not None:
        for command in ("status --porcelain", "log --format=%H%s", "for-each-ref", "stash list"):
            said[command] = sh(f"git --no-optional-locks {command}", root)
    return said


def _exercise(store: CheckpointStore, root: Path) -> None:
    """Checkpoint, diff, restore, refuse, undo: everything that reads or writes."""
    first = store.take(run_id="r")
    write(root, "src/app.py", "changed by the run\n")
    write(root, "untracked.txt", "new\n")
    last = store.take(run_id="r")
    store.diff(first.id)
    store.diff(first.id, last.id)
    store.restore(first.id, expected_id=last.id, dry_run=True)
    result = store.restore(first.id, expected_id=last.id)
    assert result.applied
    assert result.restore_checkpoint_id is not None
    store.restore(result.restore_checkpoint_id, expected_id=result.result_checkpoint_id)
    store.restore(first.id)


@pytest.mark.skipif(GIT is None, reason="needs a git binary to make the repository")
def test_a_repository_s_status_index_log_and_refs_are_byte_identical(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "src/app.py", "print('hi')\n")
    write(root, ".gitignore", "*.log\n")
    sh(f"git init -q . && git add -A && {GIT_ENV} git commit -qm first", root)
    write(root, "src/app.py", "staged change\n")
    sh("git add src/app.py", root)
    write(root, "src/app.py", "unstaged change on top\n")
    write(root, "debug.log", "ignored\n")
    repository = _repository_state(root)
    files = state_of(root)
    _exercise(store, root)
    assert _repository_state(root) == repository
    assert state_of(root) == files


def test_a_dot_git_folder_is_never_read_nor_written_without_git(
    store: CheckpointStore, root: Path
) -> None:
    """No git binary needed: a hand-made ``.git`` (unreadable, even) stays as it was."""
    write(root, ".git/HEAD", "ref: refs/heads/main\n")
    write(root, ".git/index", b"DIRC\x00\x00\x00\x02")
    write(root, ".git/refs/heads/main", "0" * 40 + "\n")
    write(root, "src/app.py", "print('hi')\n")
    (root / ".git/index").chmod(0o000)
    repository = bytes_of(root / ".git") if os.geteuid() == 0 else None
    _exercise(store, root)
    if repository is not None:
        assert bytes_of(root / ".git") == repository
    (root / ".git/index").chmod(0o600)
    assert (root / ".git/index").read_bytes() == b"DIRC\x00\x00\x00\x02"


def test_no_process_is_started_and_no_git_is_needed(
    store: CheckpointStore, root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every operation works with ``git`` (and anything else) gone from PATH and any
    attempt to start a process failing: the behaviour is the same with and without git."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse, raising=False)
    monkeypatch.setattr(os, "fork", refuse)
    write(root, "src/app.py", "print('hi')\n")
    before = state_of(root)
    _exercise(store, root)
    assert state_of(root) == before
