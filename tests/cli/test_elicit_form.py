"""The terminal's form for an MCP server's elicitation, field by field, with the
answers typed in: each of MCP's field kinds, asked again until an answer fits, hostile
text made printable, and end of input a cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from cleveragents.client._elicit import EOF, ask_elicitation
from cleveragents.runs import Elicitation, ElicitationAnswer

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Your name"},
        "agree": {"type": "boolean"},
        "count": {"type": "integer", "default": 3},
        "pet": {"type": "string", "enum": ["pet-1", "pet-2"], "enumNames": ["Cats", "Dogs"]},
        "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}]},
        "fish": {"type": "array", "items": {"anyOf": [
            {"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Salmon"}]}},
        "note": {"type": "string"},
    },
    "required": ["name", "agree"],
}  # fmt: skip


def answer(
    request: Elicitation, lines: list[str], opened: list[str] | None = None
) -> tuple[ElicitationAnswer, str]:
    shown: list[str] = []
    given: Iterator[str] = iter(lines)

    async def go() -> ElicitationAnswer:
        loop = asyncio.get_running_loop()

        def read() -> asyncio.Future[str]:
            future: asyncio.Future[str] = loop.create_future()
            future.set_result(next(given, EOF))
            return future

        if opened is None:
            return await ask_elicitation(request, shown.append, read)
        return await ask_elicitation(request, shown.append, read, lambda u: not opened.append(u))

    return asyncio.run(go()), "".join(shown)


def test_every_field_kind_is_typed_as_its_schema_says() -> None:
    request = Elicitation("srv", "form", "Fill this in", requested_schema=SCHEMA)
    lines = ["y", "", "Ada", "maybe", "y", "", "Dogs", "h1", "f2, Tuna", ""]
    result, shown = answer(request, lines)
    assert result == ElicitationAnswer("accept", {
        "name": "Ada", "agree": True, "count": 3, "pet": "pet-2", "hero": "h1",
        "fish": ["f2", "f1"]})  # fmt: skip
    assert "pet-1 (Cats) | pet-2 (Dogs)" in shown
    assert shown.count("not a valid answer") == 1  # "maybe" for a boolean


def test_decline_cancel_and_end_of_input() -> None:
    request = Elicitation("srv", "form", "Fill this in", requested_schema=SCHEMA)
    assert answer(request, ["n"])[0] == ElicitationAnswer("decline")
    assert answer(request, ["c"])[0] == ElicitationAnswer("cancel")
    assert answer(request, ["y", "Ada"])[0] == ElicitationAnswer("cancel")  # input ended


def test_a_hostile_message_and_url_are_shown_printable() -> None:
    url = "https://evil.example/\x1b[2Jpath"
    request = Elicitation("s\x1b]0;x\x07rv", "url", "Click\x1b[31m here", url=url)
    result, shown = answer(request, ["y"])
    assert result == ElicitationAnswer("accept")
    assert "\x1b" not in shown
    assert "open a page on evil.example" in shown


def test_an_accepted_page_opens_in_the_browser_only_when_it_is_https_and_accepted() -> None:
    opened: list[str] = []
    page = Elicitation("srv", "url", "Connect your account", url="https://idp.example/connect")
    result, shown = answer(page, ["y"], opened)
    assert (result, opened) == (ElicitationAnswer("accept"), ["https://idp.example/connect"])
    assert "opening it in your browser" in shown
    assert answer(page, ["n"], opened)[0] == ElicitationAnswer("decline")
    assert len(opened) == 1  # declined: nothing opened
    for url in ("file:///etc/passwd", "http://plain.example/", "javascript:alert(1)"):
        result, shown = answer(Elicitation("srv", "url", "Go", url=url), ["y"], opened)
        assert result == ElicitationAnswer("accept")
        assert "open the address above in your browser" in shown
    assert len(opened) == 1
