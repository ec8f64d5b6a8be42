"""What a checkpoint captures, notes and refuses, and where and how its store is kept."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from checkpoint_kit import write

from cleveragents.checkpoints import (
    CheckpointError,
    CheckpointNotFoundError,
    CheckpointSettings,
    CheckpointStore,
    Note,
)


def test_a_checkpoint_captures_files_links_and_directories(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "src/app.py", "print('hi')\n")
    (root / "empty").mkdir()
    (root / "link").symlink_to("src/app.py")
    first = store.take(label="start", run_id="run-1", iteration=0)
    assert (first.files, first.run_id, first.iteration, first.label) == (2, "run-1", 0, "start")
    assert first.changed_paths == ()  # a run's first checkpoint has nothing to compare with
    assert store.get(first.id) == first
    assert store.latest("run-1") == first


def test_a_later_checkpoint_names_what_changed_since_the_run_s_previous_one(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "a.txt", "one\n")
    write(root, "b.txt", "two\n")
    first = store.take(run_id="r")
    write(root, "a.txt", "uno\n")
    (root / "b.txt").unlink()
    write(root, "new/c.txt", "three\n")
    second = store.take(run_id="r", iteration=1)
    assert second.previous_id == first.id
    assert second.changed_paths == ("a.txt", "b.txt", "new", "new/c.txt")
    assert second.files_changed == 4
    assert store.take(run_id="r").changed_paths == ()
    assert [c.id for c in store.checkpoints("r")][:2] == [first.id, second.id]


def test_a_file_changed_without_a_new_size_or_time_is_still_seen(
    store: CheckpointStore, root: Path
) -> None:
    """The stat cache trusts a read only when the file is older than the racy window:
    a same-size rewrite within one clock tick is read again, not missed."""
    path = write(root, "same.txt", "aaaa\n")
    store.take()
    info = path.stat()
    path.write_text("bbbb\n")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert store.take().changed_paths == ("same.txt",)


def test_gitignore_rules_and_dot_git_are_honoured(store: CheckpointStore, root: Path) -> None:
    write(root, ".gitignore", "*.log\nbuild/\n!keep.log\n")
    write(root, "debug.log", "noise\n")
    write(root, "keep.log", "kept\n")
    write(root, "build/out.o", "binary\n")
    write(root, "sub/.gitignore", "local.txt\n")
    write(root, "sub/local.txt", "ignored here\n")
    write(root, "local.txt", "not ignored at the top\n")
    write(root, ".git/config", "[core]\n")
    write(root, "nested/.git", "gitdir: elsewhere\n")
    write(root, "nested/code.py", "x = 1\n")
    first = store.take()
    write(root, "debug.log", "more noise\n")
    write(root, "build/out.o", "rebuilt\n")
    write(root, ".git/config", "[user]\n")
    write(root, "keep.log", "kept, changed\n")
    write(root, "local.txt", "changed\n")
    second = store.take(previous_id=first.id)
    assert second.changed_paths == ("keep.log", "local.txt")
    write(root, "debug.log", "noise again\n")
    assert store.diff(second.id).files == ()


def test_a_file_over_the_size_cap_is_recorded_as_not_captured(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "big.bin", b"x" * (64 * 1024 + 1))
    write(root, "small.txt", "ok\n")
    checkpoint = store.take()
    assert checkpoint.not_captured == (Note("big.bin", "65537 bytes, over the 65536-byte cap"),)
    write(root, "big.bin", b"y" * (64 * 1024 + 7))
    diff = store.diff(checkpoint.id)
    assert [(f.path, f.status, f.captured, f.binary) for f in diff.files] == [
        ("big.bin", "modified", False, True)
    ]


def test_links_are_stored_as_links_and_never_followed(
    store: CheckpointStore, root: Path, tmp_path: Path
) -> None:
    outside = write(tmp_path, "outside/secret.txt", "secret\n")
    (root / "to-secret").symlink_to(outside)
    (root / "to-dir").symlink_to(outside.parent)
    (root / "dangling").symlink_to("nowhere")
    checkpoint = store.take()
    assert checkpoint.files == 3  # three links, nothing beneath the linked folder
    write(root, "after.txt", "x\n")
    patch = store.diff(checkpoint.id).patch
    assert "secret" not in patch.replace("secret.txt", "")


def test_special_files_are_skipped_and_noted(store: CheckpointStore, root: Path) -> None:
    os.mkfifo(root / "pipe")
    write(root, "plain.txt", "x\n")
    checkpoint = store.take()
    assert checkpoint.skipped == (Note("pipe", "a FIFO: not captured"),)
    assert checkpoint.files == 1


def test_the_store_is_private_and_outside_the_workspace(
    store: CheckpointStore, root: Path, state: Path
) -> None:
    write(root, "a.txt", "a\n")
    store.take()
    folder = state / "checkpoints"
    (inner,) = list(folder.iterdir())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(inner.stat().st_mode) == 0o700
    for path in inner.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert sorted(p.name for p in root.iterdir()) == ["a.txt"]


def test_a_link_planted_at_the_store_folder_is_refused(tmp_path: Path, root: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / "checkpoints").symlink_to(elsewhere)
    with pytest.raises(CheckpointError, match="symbolic link") as caught:
        CheckpointStore.open(state, root)
    assert caught.value.code == -32031
    assert list(elsewhere.iterdir()) == []


def test_a_state_dir_inside_the_workspace_is_not_captured(root: Path) -> None:
    write(root, "code.py", "x\n")
    with CheckpointStore.open(root / ".state", root) as store:
        checkpoint = store.take()
        assert checkpoint.files == 1
        assert [note.path for note in checkpoint.skipped] == [".state/checkpoints"]


def test_a_workspace_over_the_entry_cap_is_refused_and_nothing_is_recorded(
    state: Path, root: Path
) -> None:
    for index in range(5):
        write(root, f"f{index}.txt", "x\n")
    with CheckpointStore.open(state, root, CheckpointSettings(max_entries=4)) as store:
        with pytest.raises(CheckpointError, match="more than 4 entries"):
            store.take()
        assert store.checkpoints() == ()


@pytest.mark.parametrize("bad", ["", "../../etc/passwd", "ABCDEF0123456789", "0" * 17, "x" * 16])
def test_an_unknown_or_malformed_id_is_a_clear_error(store: CheckpointStore, bad: str) -> None:
    with pytest.raises(CheckpointNotFoundError) as caught:
        store.get(bad)
    assert caught.value.code == -32032
    assert repr(bad) in caught.value.message


def test_an_id_of_another_workspace_is_not_found(state: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    with CheckpointStore.open(state, one) as first, CheckpointStore.open(state, two) as second:
        taken = first.take()
        with pytest.raises(CheckpointNotFoundError, match="no checkpoint"):
            second.diff(taken.id)


def test_a_workspace_that_is_not_a_directory_is_refused(state: Path, tmp_path: Path) -> None:
    target = write(tmp_path, "file.txt", "x")
    with pytest.raises(CheckpointError, match="not a directory"):
        CheckpointStore.open(state, target)


def test_two_stores_and_two_threads_on_one_workspace_take_in_turn(state: Path, root: Path) -> None:
    write(root, "a.txt", "a\n")
    with CheckpointStore.open(state, root) as one, CheckpointStore.open(state, root) as two:
        taken: list[str] = []
        errors: list[BaseException] = []

        def take(store: CheckpointStore, label: str) -> None:
            try:
                for index in range(3):
                    write(root, f"{label}.txt", f"{index}\n")
                    taken.append(store.take(label=label, run_id=label).id)
            except Exception as exc:  # noqa: BLE001 - reported below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=take, args=(s, n)) for s, n in ((one, "x"), (two, "y"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert sorted(c.id for c in one.checkpoints()) == sorted(taken)
        assert len(two.checkpoints("x")) == 3
