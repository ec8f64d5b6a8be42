"""A checkpoint of the paths a caller names (``take(changed=...)``): it reads only those,
over the previous checkpoint, and must record exactly what a full read would; whatever
a read of those paths cannot settle falls back to the full read. A change nobody named
is not in it, and a restore then reports a conflict rather than overwrite it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from checkpoint_kit import write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents.checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointSettings,
    CheckpointStore,
)


def same_as_a_full_read(store: CheckpointStore, taken: Checkpoint) -> None:
    """``taken`` holds what a full read of the workspace now finds, entry for entry: a
    store of its own (another state dir) reads it all, and trees are content-addressed,
    so the two root digests are equal exactly when every entry is."""
    with (
        tempfile.TemporaryDirectory() as scratch,
        CheckpointStore.open(scratch, store.root, store.settings) as fresh,
    ):
        full = fresh.take()
        assert root_digest(fresh, full.id) == root_digest(store, taken.id), fresh.diff(full.id)
    assert (taken.files, taken.bytes) == (full.files, full.bytes)
    assert (taken.not_captured, taken.skipped) == (full.not_captured, full.skipped)


def root_digest(store: CheckpointStore, checkpoint_id: str) -> bytes:
    row = store._database.checkpoint_row(checkpoint_id)
    assert row is not None
    return bytes(row[6])


def test_only_the_named_paths_are_read_and_the_result_is_what_a_full_read_finds(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "src/app.py", "one\n")
    write(root, "src/util.py", "util\n")
    write(root, "docs/a.md", "a\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    store.take(run_id="r")
    assert store.full_reads == 1
    write(root, "src/app.py", "two\n")  # modified
    write(root, "src/new/deeper/b.py", "b\n")  # in directories that are new
    (root / "docs/a.md").unlink()  # deleted
    os.chmod(root / "src/util.py", 0o755)  # its mode only
    write(root, "src/run.log", "ignored\n")  # ignored by the rules
    write(root, "build/out.txt", "ignored\n")  # in an ignored directory
    (root / "link").symlink_to("src/app.py")  # a link, stored as a link
    named = [
        "src/app.py", str(root / "src/new/deeper/b.py"), "docs/a.md", "src/util.py",
        "src/run.log", "build/out.txt", "link",
    ]  # fmt: skip
    taken = store.take(run_id="r", changed=named)
    assert store.full_reads == 1  # the first
    assert taken.changed_paths == (
        "docs/a.md", "link", "src/app.py", "src/new", "src/new/deeper",
        "src/new/deeper/b.py", "src/util.py",
    )  # fmt: skip
    same_as_a_full_read(store, taken)
    assert store.diff(taken.id).files == ()  # and what the files hold now


def test_a_file_over_the_cap_is_noted_not_captured_and_the_note_goes_when_it_shrinks(
    store: CheckpointStore, root: Path, settings: CheckpointSettings
) -> None:
    write(root, "a.txt", "a\n")
    store.take(run_id="r")
    (root / "big.bin").write_bytes(b"x" * (settings.max_file_bytes + 1))
    grown = store.take(run_id="r", changed=["big.bin"])
    assert [note.path for note in grown.not_captured] == ["big.bin"]
    same_as_a_full_read(store, grown)
    (root / "big.bin").write_bytes(b"smaller")
    shrunk = store.take(run_id="r", changed=["big.bin"])
    assert shrunk.not_captured == ()
    same_as_a_full_read(store, shrunk)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda root: write(root, "sub/.gitignore", "*.txt\n"), "sub/.gitignore"),
        (lambda root: (root / "newdir").mkdir(), "newdir"),
        (lambda root: (root / "sub/a.txt").unlink() or (root / "sub/a.txt").mkdir(), "sub/a.txt"),
        (lambda root: write(root, ".git/config", "x"), ".git/config"),
        (lambda root: os.mkfifo(root / "fifo"), "fifo"),
    ],
    ids=["a .gitignore", "a directory", "a file become a directory", "under .git", "a FIFO"],
)
def test_what_a_read_of_the_named_paths_cannot_settle_is_read_in_full(
    store: CheckpointStore, root: Path, change: object, named: str
) -> None:
    write(root, "sub/a.txt", "a\n")
    write(root, "sub/b.txt", "b\n")
    store.take(run_id="r")
    change(root)  # type: ignore[operator]
    taken = store.take(run_id="r", changed=[named])
    assert store.full_reads == 2
    same_as_a_full_read(store, taken)


def test_a_path_through_a_link_or_outside_the_root_is_read_in_full_never_followed(
    store: CheckpointStore, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / "inside").mkdir()
    (root / "away").symlink_to(outside)
    store.take(run_id="r")
    for named in ("away/secret.txt", str(outside / "secret.txt"), "../outside/secret.txt"):
        taken = store.take(run_id="r", changed=[named])
        assert "away/secret.txt" not in taken.changed_paths
        assert taken.files == 1  # the link alone
    assert store.full_reads == 4
    assert store.diff(taken.id).files == ()


def test_a_checkpoint_another_store_recorded_since_makes_the_next_one_a_full_read(
    state: Path, root: Path, store: CheckpointStore
) -> None:
    write(root, "a.txt", "a\n")
    store.take(run_id="r")
    write(root, "other.txt", "someone else's\n")
    with CheckpointStore.open(state, root) as other:  # another process, say
        other.take(run_id="other")
    write(root, "a.txt", "b\n")
    taken = store.take(run_id="r", changed=["a.txt"])
    assert store.full_reads == 2
    assert taken.changed_paths == ("a.txt", "other.txt")


def test_a_previous_checkpoint_other_than_the_newest_makes_a_full_read(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "a.txt", "a\n")
    first = store.take(run_id="r")
    write(root, "b.txt", "b\n")
    store.take(run_id="s")  # the newest is another run's
    write(root, "a.txt", "changed\n")
    taken = store.take(run_id="r", changed=["a.txt"])
    assert store.full_reads == 3
    assert taken.previous_id == first.id
    assert taken.changed_paths == ("a.txt", "b.txt")


def test_named_paths_past_the_entry_cap_are_refused_as_a_full_read_refuses(
    state: Path, root: Path
) -> None:
    write(root, "a.txt", "a\n")
    with CheckpointStore.open(state, root, CheckpointSettings(max_entries=2)) as store:
        store.take(run_id="r")
        write(root, "b.txt", "b\n")
        write(root, "c.txt", "c\n")
        with pytest.raises(CheckpointError) as refused:
            store.take(run_id="r", changed=["b.txt", "c.txt"])
        assert refused.value.code == -32031
        assert store.full_reads == 2


def test_a_change_nobody_named_is_left_out_and_a_restore_then_refuses_to_overwrite_it(
    store: CheckpointStore, root: Path
) -> None:
    """What a checkpoint of named paths promises: the named paths as they are now, the
    rest as the previous checkpoint had it. A file someone else changed meanwhile is not
    in it; a restore that would write over that file reports a conflict instead."""
    write(root, "run.txt", "before\n")
    write(root, "user.txt", "before\n")
    first = store.take(run_id="r")
    write(root, "run.txt", "the run's\n")
    write(root, "user.txt", "the user's\n")  # nobody names it
    taken = store.take(run_id="r", changed=["run.txt"])
    assert taken.changed_paths == ("run.txt",)
    assert [f.path for f in store.diff(first.id, taken.id).files] == ["run.txt"]
    refused = store.restore(first.id, expected_id=taken.id)
    assert not refused.applied
    assert [c.path for c in refused.conflicts] == ["user.txt"]
    assert (root / "user.txt").read_text() == "the user's\n"
    done = store.restore(first.id, expected_id=taken.id, paths=["run.txt"])
    assert done.applied
    assert ((root / "run.txt").read_text(), (root / "user.txt").read_text()) == (
        "before\n",
        "the user's\n",
    )


NAMES = st.sampled_from(["a", "b", "c"])
PATHS = st.tuples(st.sampled_from(["", "d", "d/e", "f/g"]), NAMES).map(
    lambda p: f"{p[0]}/{p[1]}.txt" if p[0] else f"{p[1]}.txt"
)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["write", "delete", "chmod", "link", "big", "ignored"]),
        PATHS,
        st.binary(max_size=20),
    ),
    min_size=1,
    max_size=8,
)


def _apply(root: Path, op: str, rel: str, data: bytes, cap: int) -> str:
    path = root / rel
    if op == "ignored":
        rel = rel.replace(".txt", ".log")
        path = root / rel
    if (path.is_symlink() or path.is_file()) and op != "chmod":
        path.unlink()
    if op == "delete":
        return rel
    if op == "chmod":
        if path.exists():
            os.chmod(path, 0o700)
        return rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if op == "link":
        path.symlink_to(data.hex() or "target")
    else:
        path.write_bytes(data * (cap if op == "big" else 1) + (b"!" if op == "big" else b""))
    return rel


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(OPS, min_size=1, max_size=4))
def test_any_run_of_named_changes_records_what_a_full_read_finds(
    steps: list[list[tuple[str, str, bytes]]],
) -> None:
    """Files written, deleted, re-moded, made links, grown past the cap or ignored, in
    new and old directories, over several checkpoints: each checkpoint of the named paths
    is the full read's."""
    cap = 64
    with tempfile.TemporaryDirectory() as scratch:
        root, state = Path(scratch, "ws"), Path(scratch, "state")
        write(root, "d/a.txt", "seed\n")
        (root / ".gitignore").write_text("*.log\n")
        with CheckpointStore.open(state, root, CheckpointSettings(max_file_bytes=cap)) as store:
            store.take(run_id="r")
            for ops in steps:
                named = [_apply(root, op, rel, data, cap) for op, rel, data in ops]
                taken = store.take(run_id="r", changed=named)
                same_as_a_full_read(store, taken)
            assert store.full_reads == 1
