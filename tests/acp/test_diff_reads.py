"""The text an ACP diff shows is read as the file tools read: confined to the root, no
link followed, no FIFO waited on, bounded in size. A command beside an edit that swaps
the file for a FIFO or a link out of the root yields no diff, never a hang or a leak."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cleveragents.acp._session import _READ_LIMIT, _file_text
from cleveragents.workspace import read_confined_text


def _within_5_s(work: object) -> object:
    found: list[object] = []
    done = threading.Event()

    def run() -> None:
        found.append(work())  # type: ignore[operator]
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(5), "the read waited"
    return found[0]


def test_a_fifo_or_a_link_out_of_the_root_gives_no_text(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    secret = tmp_path / "outside.txt"
    secret.write_text("the daemon's secret\n")
    (root / "link.txt").symlink_to(secret)
    os.mkfifo(root / "pipe.txt")
    (root / "real.txt").write_text("hello\n")
    (root / "big.txt").write_bytes(b"x" * (_READ_LIMIT + 1))
    for name in ("link.txt", "pipe.txt", "big.txt", "../outside.txt", "missing.txt"):
        assert (
            _within_5_s(lambda name=name: read_confined_text(str(root), name, _READ_LIMIT)) is None
        )
    assert read_confined_text(str(root), "real.txt", _READ_LIMIT) == "hello\n"


def test_the_before_text_of_an_edit_is_read_confined_too(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    os.mkfifo(root / "pipe.txt")
    (root / "link.txt").symlink_to("/etc/passwd")
    for name in ("pipe.txt", "link.txt"):
        inputs = {"path": name, "sandbox_root": str(root)}
        assert _within_5_s(lambda inputs=inputs: _file_text(inputs)) is None
    new = _file_text({"path": "new.txt", "sandbox_root": str(root)})
    assert new is not None
    assert (new.real, new.text) == (str(root / "new.txt"), None)
