"""The state dir by descriptor: no link followed at any depth, no FIFO waited on, reads
and lines bounded, new files 0600 in 0700 folders, and a secret that a planted file
cannot stand in for."""

from __future__ import annotations

import io
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from cleveragents.statedir import StateDir, read_lines


def _within_5_s(work: Callable[[], object]) -> object:
    found: list[object] = []
    done = threading.Event()

    def run() -> None:
        found.append(work())
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(5), "waited on a FIFO (or read without end)"
    return found[0]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_link_planted_at_a_folder_is_refused_and_nothing_is_made_through_it(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "runs").symlink_to(outside)
    state = StateDir(tmp_path / "state")
    with pytest.raises(OSError, match="symbolic link or not a folder; not followed"):
        state.folder("runs", create=True)
    with pytest.raises(OSError, match="not followed"):
        state.folder("runs", "deeper", create=True)
    assert list(outside.iterdir()) == []


def test_new_files_are_0600_in_0700_folders_and_a_folder_of_ours_is_tightened(
    tmp_path: Path,
) -> None:
    (tmp_path / "state" / "acp").mkdir(parents=True, mode=0o755)
    os.chmod(tmp_path / "state" / "acp", 0o755)  # an older version's, made under umask 022
    state = StateDir(tmp_path / "state")
    folder = state.folder("outputs", "run-1", create=True)
    assert folder is not None
    with folder:
        os.close(folder.create("a.json"))
        folder.replace("b.json", b"{}")
    assert _mode(tmp_path / "state" / "outputs") == 0o700
    assert _mode(tmp_path / "state" / "outputs" / "run-1") == 0o700
    assert _mode(tmp_path / "state" / "outputs" / "run-1" / "a.json") == 0o600
    assert _mode(tmp_path / "state" / "outputs" / "run-1" / "b.json") == 0o600
    acp = state.folder("acp", create=True)
    assert acp is not None
    acp.close()
    assert _mode(tmp_path / "state" / "acp") == 0o700


def test_a_replaced_file_replaces_a_planted_link_never_its_target(tmp_path: Path) -> None:
    target = tmp_path / "shell-rc"
    target.write_text("original\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "run-index.json").symlink_to(target)
    state = StateDir(tmp_path / "state")
    top = state.folder()
    assert top is not None
    with top:
        with pytest.raises(FileExistsError):
            top.create("run-index.json")  # O_EXCL: a link at the name is a taken name
        top.replace("run-index.json", b"new")
    assert target.read_text() == "original\n"
    assert (tmp_path / "state" / "run-index.json").read_bytes() == b"new"


def test_a_fifo_a_device_link_or_a_folder_at_a_file_s_name_is_skipped_never_waited_on(
    tmp_path: Path,
) -> None:
    folder_path = tmp_path / "state" / "runs"
    folder_path.mkdir(parents=True)
    os.mkfifo(folder_path / "fifo.jsonl")
    (folder_path / "zero.jsonl").symlink_to("/dev/zero")
    (folder_path / "dir.jsonl").mkdir()
    (folder_path / "real.jsonl").write_bytes(b"x" * 10)
    state = StateDir(tmp_path / "state")
    folder = state.folder("runs")
    assert folder is not None
    with folder:
        for name in ("fifo.jsonl", "zero.jsonl", "dir.jsonl", "missing.jsonl"):
            assert _within_5_s(lambda name=name: folder.open_read(name)) is None
            assert _within_5_s(lambda name=name: folder.read_bytes(name, 100)) is None
        assert _within_5_s(lambda: folder.open_append("fifo.jsonl")) is None
        assert _within_5_s(lambda: folder.open_append("zero.jsonl")) is None
        assert folder.read_bytes("real.jsonl", 10) == b"x" * 10
        assert folder.read_bytes("real.jsonl", 9) is None  # larger than asked: not read
    assert not (folder_path / "zero.jsonl").resolve().is_file()


def test_an_over_long_line_is_skipped_as_it_is_read() -> None:
    data = b"first\n" + b"x" * (3 * 1024 * 1024) + b"\nlast\n" + b"y" * 50
    got = list(read_lines(io.BufferedReader(io.BytesIO(data)), 1024))
    assert got == [b"first\n", None, b"last\n", b"y" * 50]
    assert list(read_lines(io.BufferedReader(io.BytesIO(b"z" * 2000)), 1024)) == [None]
    assert list(read_lines(io.BufferedReader(io.BytesIO(b"z" * 1024 + b"\n")), 1024)) == [
        b"z" * 1024 + b"\n"
    ]


def test_the_pinned_state_dir_is_kept_when_its_name_is_swapped_for_a_link(
    tmp_path: Path,
) -> None:
    (tmp_path / "state").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = StateDir(tmp_path / "state")
    first = state.folder("acp", create=True)
    assert first is not None
    first.close()
    os.rename(tmp_path / "state", tmp_path / "moved")
    (tmp_path / "state").symlink_to(elsewhere)
    folder = state.folder("runs", create=True)
    assert folder is not None
    with folder:
        os.close(folder.create("x.jsonl"))
    assert (tmp_path / "moved" / "runs" / "x.jsonl").is_file()
    assert list(elsewhere.iterdir()) == []


def test_a_removed_state_dir_is_made_again_not_written_into_its_ghost(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    folder = state.folder("runs", create=True)
    assert folder is not None
    folder.close()
    os.rmdir(tmp_path / "state" / "runs")
    os.rmdir(tmp_path / "state")
    folder = state.folder("runs", create=True)
    assert folder is not None
    with folder:
        os.close(folder.create("x.jsonl"))
    assert (tmp_path / "state" / "runs" / "x.jsonl").is_file()


def test_the_secret_is_0600_shared_by_every_handle_and_one_key_per_purpose(
    tmp_path: Path,
) -> None:
    assert StateDir(tmp_path / "missing").key("run-index") is None  # no state dir, no secret
    (tmp_path / "state").mkdir()
    one, two = StateDir(tmp_path / "state"), StateDir(tmp_path / "state")
    key = one.key("run-index")
    assert key is not None
    assert len(key) == 32
    assert two.key("run-index") == key
    assert one.key("acp-session") not in (None, key)
    assert _mode(tmp_path / "state" / "secret.key") == 0o600


@pytest.mark.parametrize("plant", ["world-readable", "link", "fifo", "short"])
def test_a_planted_secret_is_replaced_not_used(tmp_path: Path, plant: str) -> None:
    """A checkout or an archive may carry ``secret.key`` (git writes it 0644): a key the
    attacker knows would let their planted files pass as the daemon's own."""
    state_path = tmp_path / "state"
    state_path.mkdir()
    known = b"k" * 32
    secret = state_path / "secret.key"
    target = tmp_path / "target"
    target.write_bytes(known)
    os.chmod(target, 0o600)
    if plant == "world-readable":
        secret.write_bytes(known)
        os.chmod(secret, 0o644)
    elif plant == "link":
        secret.symlink_to(target)
    elif plant == "fifo":
        os.mkfifo(secret)
    else:
        secret.write_bytes(b"short")
        os.chmod(secret, 0o600)
    state = StateDir(state_path)
    key = _within_5_s(lambda: state.key("acp-session"))
    honest = StateDir(tmp_path / "other")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "secret.key").write_bytes(known)
    os.chmod(tmp_path / "other" / "secret.key", 0o600)
    assert key is not None
    assert key != honest.key("acp-session")  # the planted secret was not used
    assert target.read_bytes() == known  # the link's target untouched
    assert stat.S_ISREG(os.lstat(secret).st_mode)
    assert _mode(secret) == 0o600


def test_read_file_gives_a_kept_file_whole_and_none_for_anything_else(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    assert state.read_file("kept", "a.json", limit=100) is None  # no folder yet
    with state.folder("kept", create=True) as folder:  # type: ignore[union-attr]
        folder.replace("a.json", b'{"a": 1}')
        folder.replace("big.json", b"x" * 101)
    assert state.read_file("kept", "a.json", limit=100) == b'{"a": 1}'
    assert state.read_file("kept", "missing.json", limit=100) is None
    assert state.read_file("kept", "big.json", limit=100) is None  # over the limit
    secret = tmp_path / "secret.json"
    secret.write_bytes(b"not the state dir's")
    os.symlink(secret, tmp_path / "state" / "kept" / "link.json")
    assert state.read_file("kept", "link.json", limit=100) is None  # never followed
    os.mkfifo(tmp_path / "state" / "kept" / "fifo.json")
    assert _within_5_s(lambda: state.read_file("kept", "fifo.json", limit=100)) is None
    os.symlink(tmp_path, tmp_path / "state" / "linked")
    assert state.read_file("linked", "secret.json", limit=100) is None  # a linked folder
