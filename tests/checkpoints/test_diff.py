"""Diffs: git's patch format (applied by git itself when there is one), limits to paths,
odd names, and bounded line matching."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from checkpoint_kit import sh, state_of, write

from cleveragents.checkpoints import CheckpointSettings, CheckpointStore


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to apply the patch")
def test_the_patch_applies_with_git_and_gives_the_later_tree(
    store: CheckpointStore, root: Path, tmp_path: Path
) -> None:
    write(root, "a.txt", "".join(f"line {n}\n" for n in range(40)))
    write(root, "gone.txt", "bye\n")
    write(root, "tail.txt", "no newline at the end")
    write(root, "mode.sh", "#!/bin/sh\n")
    write(root, "odd name\twith tab.txt", "odd\n")
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    first = store.take()
    write(root, "a.txt", "".join(f"line {n}\n" for n in range(40) if n != 5) + "added\n")
    (root / "gone.txt").unlink()
    write(root, "tail.txt", "still no newline, but changed")
    (root / "mode.sh").chmod(0o755)
    write(root, "odd name\twith tab.txt", "odder\n")
    write(root, "dir/new.txt", "new\n")
    (root / "ln").symlink_to("a.txt")
    diff = store.diff(first.id)
    (tmp_path / "change.patch").write_text(diff.patch)
    sh(f"git apply --unsafe-paths -p1 {tmp_path / 'change.patch'}", copy)
    assert state_of(copy) == state_of(root)


def test_a_diff_can_be_limited_to_paths(store: CheckpointStore, root: Path) -> None:
    write(root, "src/a.py", "a\n")
    write(root, "docs/b.md", "b\n")
    first = store.take()
    write(root, "src/a.py", "A\n")
    write(root, "docs/b.md", "B\n")
    diff = store.diff(first.id, paths=["src"])
    assert [f.path for f in diff.files] == ["src/a.py"]
    assert "docs" not in diff.patch
    assert store.diff(first.id, paths=["src/a.py"], patch=False).patch == ""


def test_names_that_need_quoting_are_quoted_as_git_does(store: CheckpointStore, root: Path) -> None:
    first = store.take()
    write(root, 'quote"and\\back.txt', "x\n")
    write(root, "caf\u00e9.txt", "y\n")
    patch = store.diff(first.id).patch
    assert 'diff --git "a/quote\\"and\\\\back.txt" "b/quote\\"and\\\\back.txt"' in patch
    assert '"b/caf\\303\\251.txt"' in patch


def test_a_large_text_file_gets_counts_without_hunks(state: Path, root: Path) -> None:
    settings = CheckpointSettings(diff_max_bytes=1000)
    with CheckpointStore.open(state, root, settings) as store:
        write(root, "big.txt", "".join(f"{n}\n" for n in range(600)))
        first = store.take()
        write(root, "big.txt", "".join(f"{n}\n" for n in range(600) if n % 100) + "end\n")
        (change,) = store.diff(first.id).files
        assert (change.additions, change.deletions, change.binary) == (1, 6, False)
        assert "over 1000 bytes: no line diff" in store.diff(first.id).patch
