"""``printable`` and ``json_text``: model text made inert for a terminal."""

from __future__ import annotations

import json
import re
import time

import pytest

from cleveragents.client._terminal import json_text, printable

ANY_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b]0;pwned title\x07b", "ab"),  # OSC 0: window title, BEL-terminated
        ("a\x1b]0;pwned title\x1b\\b", "ab"),  # ... ST-terminated
        ("a\x1b]52;c;ZWNobyBwd25lZA==\x07b", "ab"),  # OSC 52: write the clipboard
        ("a\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),  # OSC 8
        ("a\x9d0;8-bit title\x9cb", "ab"),  # 8-bit OSC and ST
        ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
        ("a\x1b_apc\x1b\\b\x1b^pm\x07c\x1bXsos\x1b\\d", "abcd"),  # APC, PM, SOS
        ("a\x1b[2Ab\x1b[2Jc\x1b[Hd", "abcd"),  # cursor up, clear screen, home
        ("a\x1b[?1049hb\x1b[38;5;196mc\x1b[0m", "abc"),  # private mode, colour
        ("a\x9b2Jb\x9b1;1Hc", "abc"),  # 8-bit CSI
        ("a\x1b7b\x1b8c\x1bcd\x1b(Be", "abcde"),  # save/restore cursor, reset, charset
        ("over\rwrite\x08\x08xx\x00\x7f\x85", "overwritexx"),  # CR, BS, NUL, DEL, NEL
        ("lone\x1b", "lone"),
        ("open\x1b]52;c;unterminated", "open52;c;unterminated"),  # shown, not obeyed
        ("open\x9d0;unterminated", "open0;unterminated"),
    ],
)
def test_escape_sequences_and_control_characters_are_removed(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_unicode_text_newlines_and_tabs_pass_unchanged() -> None:
    text = "Grüße, 世界 — naïve café 🎉\n\tindented\nlast line… «ok» [1;2] ]0; ESC"
    assert printable(text) == text


@pytest.mark.parametrize(
    "hostile",
    ["\x1b]" * 100_000, "\x9d" + "a" * 100_000, ("\x9da" * 50_000), "\x1b[" + "1;" * 100_000],
)
def test_hostile_text_is_cleaned_in_linear_time(hostile: str) -> None:
    started = time.perf_counter()
    cleaned = printable(hostile)
    # Quadratic behaviour on 100,000 characters takes minutes; linear takes milliseconds.
    assert time.perf_counter() - started < 2.0
    assert not ANY_CONTROL.search(cleaned)


def test_json_texts_escape_the_controls_json_dumps_leaves_raw() -> None:
    value = {"text": "\x1b]0;t\x07 \x9b2J \x9d52;c;x\x9c \x7f Grüße\n", "n": 1}
    line = json_text(value)
    assert not ANY_CONTROL.search(line)
    assert "Grüße" in line  # non-ASCII text stays readable
    assert json.loads(line) == value
