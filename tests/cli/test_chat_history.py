"""The chat's history file: private, in the state dir, never written through a link
planted at its name, and read back only from its newest end."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents.client import _chat_input
from cleveragents.client._chat_input import HISTORY_FILE, StateDirHistory


def test_messages_come_back_newest_first_multi_line_ones_whole(tmp_path: Path) -> None:
    history = StateDirHistory(tmp_path / "state")
    history.store_string("first")
    history.store_string("second\nspans two lines")
    again = StateDirHistory(tmp_path / "state")
    assert list(again.load_history_strings()) == ["second\nspans two lines", "first"]
    assert (tmp_path / "state" / HISTORY_FILE).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700


def test_a_link_planted_at_the_history_s_name_is_neither_written_nor_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.txt"
    target.write_text("+someone else's file\n")
    (state / HISTORY_FILE).symlink_to(target)
    history = StateDirHistory(state)
    history.store_string("a secret typed in the chat")
    assert target.read_text() == "+someone else's file\n"
    assert list(history.load_history_strings()) == []
    assert "symbolic link" in caplog.text or "not a regular file" in caplog.text


def test_only_the_newest_end_of_a_long_history_is_read_and_the_file_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_chat_input, "HISTORY_BYTES", 1000)
    history = StateDirHistory(tmp_path / "state")
    for number in range(400):
        history.store_string(f"message {number}")
    assert (tmp_path / "state" / HISTORY_FILE).stat().st_size > 4000
    loaded = list(StateDirHistory(tmp_path / "state").load_history_strings())
    assert loaded[0] == "message 399"
    assert 10 < len(loaded) < 50  # about 1000 bytes' worth, each entry whole
    assert all(entry.startswith("message ") for entry in loaded)
    assert (tmp_path / "state" / HISTORY_FILE).stat().st_size <= 1000
