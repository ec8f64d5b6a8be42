"""Pruning: by age and by size, oldest first, never a protected checkpoint or a live
run's, and what survives still restores."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from checkpoint_kit import state_of, write

from cleveragents.checkpoints import CheckpointSettings, CheckpointStore

DAY = 86400.0


def test_checkpoints_past_the_retention_go_except_protected_ones(
    store: CheckpointStore, root: Path
) -> None:
    ids = []
    for index in range(4):
        write(root, "a.txt", f"{index}\n")
        ids.append(store.take(run_id="live" if index == 1 else "old").id)
    later = time.time() + store.settings.retention_seconds + DAY
    result = store.prune(protected_ids={ids[3]}, protected_runs={"live"}, now=later)
    assert result.removed == (ids[0], ids[2])
    assert [c.id for c in store.checkpoints()] == [ids[1], ids[3]]
    assert result.bytes_after < result.bytes_before
    assert store.prune(now=time.time()).removed == ()  # none is old yet


def test_over_the_size_cap_the_oldest_go_first_until_it_fits(state: Path, root: Path) -> None:
    with CheckpointStore.open(state, root, CheckpointSettings(max_store_bytes=2500)) as store:
        ids = []
        for index in range(5):
            write(root, "blob.txt", f"{index}\n" * 500)  # 1,000 bytes, new each time
            ids.append(store.take().id)
        result = store.prune()
        assert result.removed == tuple(ids[:3])
        assert result.bytes_after <= 2500
        assert [c.id for c in store.checkpoints()] == ids[3:]


def test_what_survives_a_prune_still_restores_and_later_takes_store_again(
    store: CheckpointStore, root: Path
) -> None:
    write(root, "keep.txt", "kept\n")
    write(root, "a.txt", "first\n")
    old = store.take().id
    write(root, "a.txt", "second\n")
    kept = store.take()
    expected = state_of(root)
    store.prune(protected_ids={kept.id}, now=time.time() + store.settings.retention_seconds + 1)
    assert [c.id for c in store.checkpoints()] == [kept.id]
    write(root, "a.txt", "first\n")  # content whose only copy was pruned
    again = store.take()
    write(root, "a.txt", "third\n")
    store.restore(kept.id)
    assert state_of(root) == expected
    store.restore(again.id)
    assert (root / "a.txt").read_text() == "first\n"
    assert old not in {c.id for c in store.checkpoints()}


def test_after_every_checkpoint_is_pruned_unchanged_files_are_stored_again(
    store: CheckpointStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stat cache says the file is unchanged, but its content was pruned: the next
    checkpoint must store it again, not refer to what is gone."""
    monkeypatch.setattr("cleveragents.checkpoints._scan.RACY_NS", -(10**9))  # trust every read
    write(root, "a.txt", "unchanged all along\n")
    store.take()
    assert store.prune(now=time.time() + store.settings.retention_seconds + 1).bytes_after == 0
    again = store.take()
    (root / "a.txt").unlink()
    store.restore(again.id)
    assert (root / "a.txt").read_text() == "unchanged all along\n"
