"""A restore: refused on conflicts unless forced, a dry run that changes nothing, an
undo, limits to paths, and what it never touches or writes through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from checkpoint_kit import state_of, write

from cleveragents.checkpoints import CheckpointStore, Note


def _run(store: CheckpointStore, root: Path) -> tuple[str, str]:
    """A run's first and last checkpoints around its edits of a.txt and b.txt."""
    write(root, "a.txt", "a1\n")
    write(root, "b.txt", "b1\n")
    write(root, "user.txt", "the user's\n")
    first = store.take(run_id="r", iteration=0).id
    write(root, "a.txt", "a2\n")
    write(root, "b.txt", "b2\n")
    last = store.take(run_id="r", iteration=1).id
    return first, last


def test_a_file_changed_since_the_expected_checkpoint_stops_the_restore(
    store: CheckpointStore, root: Path
) -> None:
    first, last = _run(store, root)
    write(root, "a.txt", "the user's own edit\n")
    before = state_of(root)
    result = store.restore(first, expected_id=last)
    assert not result.applied
    assert result.conflicts == (Note("a.txt", f"changed after checkpoint {last}"),)
    assert [f.path for f in result.files] == ["a.txt", "b.txt"]
    assert (result.restore_checkpoint_id, result.result_checkpoint_id) == (None, None)
    assert state_of(root) == before
    assert [c.id for c in store.checkpoints()] == [first, last]  # no checkpoint left behind


def test_a_forced_restore_overwrites_the_conflict_and_can_be_undone(
    store: CheckpointStore, root: Path
) -> None:
    first, last = _run(store, root)
    write(root, "a.txt", "the user's own edit\n")
    before = state_of(root)
    result = store.restore(first, expected_id=last, force=True)
    assert result.applied
    assert result.conflicts == ()
    assert (root / "a.txt").read_text() == "a1\n"
    assert result.restore_checkpoint_id is not None
    undo = store.restore(result.restore_checkpoint_id, expected_id=result.result_checkpoint_id)
    assert undo.applied
    assert undo.conflicts == ()
    assert state_of(root) == before
    assert (root / "a.txt").read_text() == "the user's own edit\n"


def test_an_undo_is_refused_when_the_restored_files_changed_again(
    store: CheckpointStore, root: Path
) -> None:
    first, last = _run(store, root)
    result = store.restore(first, expected_id=last)
    write(root, "b.txt", "edited after the restore\n")
    assert result.restore_checkpoint_id is not None
    undo = store.restore(result.restore_checkpoint_id, expected_id=result.result_checkpoint_id)
    assert not undo.applied
    assert [note.path for note in undo.conflicts] == ["b.txt"]


def test_a_dry_run_reports_and_changes_nothing(store: CheckpointStore, root: Path) -> None:
    first, last = _run(store, root)
    write(root, "c.txt", "new\n")
    before = state_of(root)
    result = store.restore(first, expected_id=last, dry_run=True)
    assert result.dry_run
    assert not result.applied
    assert [(f.path, f.status) for f in result.files] == [
        ("a.txt", "modified"),
        ("b.txt", "modified"),
        ("c.txt", "deleted"),
    ]
    assert [note.path for note in result.conflicts] == ["c.txt"]  # created after `last`
    assert state_of(root) == before
    assert len(store.checkpoints()) == 2


def test_a_restore_limited_to_paths_leaves_the_others(store: CheckpointStore, root: Path) -> None:
    first, _ = _run(store, root)
    write(root, "user.txt", "edited by the user meanwhile\n")
    write(root, "made/by/run.txt", "x\n")
    touched = store.changed_paths([first, store.take(run_id="r").id])
    assert touched == ("a.txt", "b.txt", "made", "made/by", "made/by/run.txt", "user.txt")
    result = store.restore(first, paths=["a.txt", "made"])
    assert result.applied
    assert (root / "a.txt").read_text() == "a1\n"
    assert (root / "b.txt").read_text() == "b2\n"
    assert (root / "user.txt").read_text() == "edited by the user meanwhile\n"
    assert not (root / "made").exists()


def test_a_restore_removes_emptied_directories_and_recreates_removed_ones(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "keep/deep/file.txt", "k\n")
    (root / "empty").mkdir()
    first = store.take()
    (root / "keep/deep/file.txt").unlink()
    (root / "keep/deep").rmdir()
    (root / "keep").rmdir()
    (root / "empty").rmdir()
    write(root, "extra/one/two.txt", "2\n")
    store.restore(first.id)
    assert state_of(root) == {
        "empty": ("dir", 0, b""),
        "keep": ("dir", 0, b""),
        "keep/deep": ("dir", 0, b""),
        "keep/deep/file.txt": ("file", 0o644, b"k\n"),
    }


def test_a_restore_never_writes_through_a_link_out_of_the_root(
    store: CheckpointStore, root: Path, tmp_path: Path
) -> None:
    write(root, "conf/settings.txt", "mine\n")
    first = store.take()
    outside = tmp_path / "outside"
    write(outside, "settings.txt", "outside, untouched\n")
    (root / "conf/settings.txt").unlink()
    (root / "conf").rmdir()
    (root / "conf").symlink_to(outside)
    result = store.restore(first.id)
    assert result.applied
    assert (outside / "settings.txt").read_text() == "outside, untouched\n"
    assert not (root / "conf").is_symlink()
    assert (root / "conf/settings.txt").read_text() == "mine\n"
    write(root, "conf/settings.txt", "edited\n")
    (root / "conf/settings.txt").unlink()
    (root / "conf/settings.txt").symlink_to(outside / "settings.txt")
    store.restore(first.id)
    assert (outside / "settings.txt").read_text() == "outside, untouched\n"
    assert (root / "conf/settings.txt").read_text() == "mine\n"
    assert not (root / "conf/settings.txt").is_symlink()


def test_what_no_checkpoint_can_capture_is_never_overwritten(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "notes.log", "captured before the rule\n")
    write(root, "big.bin", b"small at first")
    first = store.take()
    write(root, ".gitignore", "*.log\n")
    write(root, "notes.log", "ignored now, and precious\n")
    write(root, "big.bin", b"z" * (64 * 1024 + 1))
    result = store.restore(first.id)
    assert not result.applied
    assert {note.path for note in result.conflicts} == {"notes.log", "big.bin"}
    forced = store.restore(first.id, force=True)
    assert forced.applied
    assert {note.path for note in forced.skipped} == {"notes.log", "big.bin"}
    assert (root / "notes.log").read_text() == "ignored now, and precious\n"
    assert (root / "big.bin").stat().st_size == 64 * 1024 + 1
    assert not (root / ".gitignore").exists()


def test_a_restore_with_nothing_to_do_takes_no_checkpoint(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "a.txt", "a\n")
    first = store.take()
    result = store.restore(first.id, expected_id=first.id)
    assert result.applied
    assert result.files == ()
    assert result.restore_checkpoint_id is None
    assert len(store.checkpoints()) == 1


def test_a_restore_puts_back_links_and_modes(store: CheckpointStore, root: Path) -> None:
    write(root, "run.sh", "#!/bin/sh\n").chmod(0o750)
    (root / "current").symlink_to("run.sh")
    before = state_of(root)
    first = store.take()
    (root / "run.sh").chmod(0o600)
    (root / "current").unlink()
    write(root, "current", "a file now\n")
    store.restore(first.id)
    assert state_of(root) == before


def test_an_unreadable_entry_is_not_captured_and_never_touched(
    store: CheckpointStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file or folder the user cannot read (simulated: the tests may run as root) is
    listed as not captured, and a restore leaves it and what lies beneath it alone."""
    write(root, "secret.txt", "v1\n")
    write(root, "locked/inside.txt", "v1\n")
    first = store.take()
    write(root, "secret.txt", "v2, unreadable now\n")
    write(root, "locked/inside.txt", "v2\n")
    real_open = os.open

    def refusing_open(path: str, flags: int, *args: object, **kwargs: object) -> int:
        if path in ("secret.txt", "locked"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr("cleveragents.checkpoints._scan.os.open", refusing_open)
    second = store.take()
    assert second.not_captured == (
        Note("locked", "unreadable (Permission denied)"),
        Note("secret.txt", "unreadable (Permission denied)"),
    )
    result = store.restore(first.id, force=True)
    assert {note.path for note in result.skipped} == {"locked", "locked/inside.txt", "secret.txt"}
    assert (root / "secret.txt").read_text() == "v2, unreadable now\n"
    assert (root / "locked/inside.txt").read_text() == "v2\n"


def test_names_that_are_not_utf8_round_trip(store: CheckpointStore, root: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")
    (root / name).write_text("latin-1 name\n")
    first = store.take()
    (root / name).write_text("changed\n")
    (diff,) = store.diff(first.id).files
    assert diff.path == name
    assert '"a/caf\\351.txt"' in store.diff(first.id).patch
    store.restore(first.id)
    assert (root / name).read_text() == "latin-1 name\n"
