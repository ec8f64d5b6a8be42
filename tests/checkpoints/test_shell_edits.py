"""What real shell commands do to a workspace shows in a diff, and a restore undoes it."""

from __future__ import annotations

from pathlib import Path

from checkpoint_kit import sh, state_of, write

from cleveragents.checkpoints import CheckpointStore


def _seed(root: Path) -> None:
    write(root, "edit.txt", "alpha\nbeta\ngamma\n")
    write(root, "gone.txt", "to be removed\n")
    write(root, "old-name.txt", "moved\n")
    write(root, "doomed/inner/a.txt", "a\n")
    write(root, "doomed/b.txt", "b\n")
    write(root, "tool.sh", "#!/bin/sh\necho hi\n").chmod(0o755)
    (root / "link").symlink_to("edit.txt")


EDITS = """
sed -i 's/beta/BETA/' edit.txt
rm gone.txt
mv old-name.txt new-name.txt
printf 'fresh\\n' > fresh.txt
mkdir -p made/deeper && printf 'deep\\n' > made/deeper/file.txt
rm -r doomed
printf '\\000\\001\\002binary' > blob.bin
ln -sf new-name.txt link
chmod 644 tool.sh
head -c 70000 /dev/zero > huge.bin
"""


def test_each_shell_edit_shows_in_the_diff_with_its_status(
    store: CheckpointStore, root: Path
) -> None:
    _seed(root)
    before = store.take(run_id="r", iteration=0)
    sh(EDITS, root)
    after = store.take(run_id="r", iteration=1)
    diff = store.diff(before.id, after.id)
    found = {f.path: (f.status, f.additions, f.deletions, f.binary) for f in diff.files}
    assert found == {
        "blob.bin": ("added", 0, 0, True),
        "doomed/b.txt": ("deleted", 0, 1, False),
        "doomed/inner/a.txt": ("deleted", 0, 1, False),
        "edit.txt": ("modified", 1, 1, False),
        "fresh.txt": ("added", 1, 0, False),
        "gone.txt": ("deleted", 0, 1, False),
        "huge.bin": ("added", 0, 0, True),
        "link": ("modified", 1, 1, False),
        "made/deeper/file.txt": ("added", 1, 0, False),
        "new-name.txt": ("added", 1, 0, False),
        "old-name.txt": ("deleted", 0, 1, False),
        "tool.sh": ("modified", 0, 0, False),
    }
    assert [f.captured for f in diff.files if f.path == "huge.bin"] == [False]
    assert "-beta\n+BETA\n" in diff.patch
    assert "old mode 100755\nnew mode 100644\n" in diff.patch
    assert "Binary files /dev/null and b/blob.bin differ" in diff.patch
    assert "-edit.txt\n\\ No newline at end of file\n+new-name.txt\n" in diff.patch
    assert store.diff(before.id).files == diff.files  # the working tree says the same


def test_a_restore_undoes_every_shell_edit(store: CheckpointStore, root: Path) -> None:
    _seed(root)
    original = state_of(root)
    before = store.take(run_id="r", iteration=0)
    sh(EDITS.replace("head -c 70000 /dev/zero > huge.bin", ""), root)
    after = store.take(run_id="r", iteration=1)
    result = store.restore(before.id, expected_id=after.id)
    assert result.applied
    assert result.conflicts == ()
    assert result.skipped == ()
    assert state_of(root) == original
    assert (root / "link").is_symlink()
    assert {f.path for f in result.files} == {f.path for f in store.diff(before.id, after.id).files}
