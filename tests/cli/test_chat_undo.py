"""The chat's ``/diff`` and ``/undo`` on a pseudo-terminal (issue 24, item 10): a
three-turn conversation with an approval and a Ctrl-C mid-turn, then what the turns
changed, an undo refused by a later edit and forced, the undo itself undone with
``/restore``, and the next message going on from before the undone turn."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_kit import openai_model
from test_chat import ChatOnPty, Plan, chain, said

from kit.cli import workspace
from kit.loopback import LoopbackServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Any]:
    """Starts a chat (``chat(*args, **env)``), closed at the end whatever happened."""
    started: list[ChatOnPty] = []

    def start(*args: str, **env: str) -> ChatOnPty:
        started.append(ChatOnPty(tmp_path, *args, **env))
        return started[-1]

    yield start
    for one in started:
        one.close()


def test_undo_puts_back_the_last_turn_refusing_a_later_edit_and_restore_undoes_it(
    tmp_path: Path, chat: Any
) -> None:
    ws = workspace(tmp_path)
    notes, draft = "- fixed the parser\n", "a draft\n"
    plan = Plan(("call", "file-write", {"path": "notes.md", "content": notes}), "Written.",
                ("hang", "Let me think about"),
                ("call", "file-write", {"path": "b.md", "content": draft}), "Drafted.",
                "Going on.")  # fmt: skip
    with LoopbackServer(respond=plan) as server:
        chat = chat("-m", openai_model(server), OPENAI_API_KEY="unused")
        chat.send("write the notes")
        chat.showing("allow? [y]es / [n]o / [a]lways")
        chat.child.send("a\r")  # always: not asked again in this chat
        chat.showing("Written.")
        chat.showing(" notes.md | 1 + (new)")  # each turn ends with its diffstat, as run does
        chat.send("explain")
        chat.showing("think about")
        chat.child.sendintr()
        chat.showing("■ cancelled")
        chat.send("draft b")
        chat.showing("Drafted.")
        assert (ws / "b.md").read_text() == draft

        chat.send("/diff")
        shown = chat.showing("2 files changed, 2 insertions(+)")
        assert " b.md     | 1 + (new)" in shown
        assert " notes.md | 1 + (new)" in shown
        assert "+- fixed the parser" in shown

        (ws / "b.md").write_text("the user's edit\n")
        chat.send("/undo")
        chat.showing("refused, nothing was changed")
        chat.showing("b.md: changed after checkpoint")
        assert (ws / "b.md").read_text() == "the user's edit\n"

        chat.send("/undo force")
        undone = chat.showing("the next message goes on from before that turn")
        assert not (ws / "b.md").exists()
        assert (ws / "notes.md").read_text() == notes  # the first turn's file stays
        [checkpoint] = re.findall(r"undo it: /restore ([0-9a-f]{16})", "\n".join(undone))

        chat.send(f"/restore {checkpoint}")
        chat.showing(f"/restore of checkpoint {checkpoint}: 1 file put back")
        assert (ws / "b.md").read_text() == "the user's edit\n"

        chat.send("and now?")
        chat.showing("Going on.")
        assert chat.leave() == 0
    # The undone turn is out of the conversation; the cancelled one's words are in it.
    assert said(server.requests[-1], "user") == ["write the notes", "explain", "and now?"]
    [(first, _, s1), (second, c2, s2), (_, c3, _), (_, c4, _)] = chain(tmp_path / "state")
    assert (s1, s2) == ("completed", "cancelled")
    assert (c2, c3, c4) == (first, second, second)  # the last went on from before the third
