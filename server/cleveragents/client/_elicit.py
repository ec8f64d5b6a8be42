"""An MCP server's elicitation, asked at the terminal by ``cleveragents run``.

The server's words and schema are untrusted: every piece shown is made printable and
cut, at most ``MAX_FIELDS`` fields are asked, and an answer is typed as the schema says
(a number that does not parse, a choice not offered, is asked again). The user first
chooses to answer, decline or cancel; end of input or Ctrl-C is ``cancel``. The content
is checked against the whole schema again by ``cleveragents.mcp`` before it goes back.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Callable
from typing import Any

from ..runs import Elicitation, ElicitationAnswer
from ._terminal import json_text, printable

MAX_FIELDS = 20
MAX_SHOWN = 300
"""Characters of a description, a title or a choice shown."""

ReadLine = Callable[[], "asyncio.Future[str]"]
EOF = "\x00eof"


class _Cancelled(Exception):
    pass


async def ask_elicitation(
    request: Elicitation,
    write: Callable[[str], None],
    read: ReadLine,
    open_url: Callable[[str], bool] = lambda _url: False,
) -> ElicitationAnswer:
    """Ask ``request`` (see the module docstring); ``write`` shows, ``read`` reads a
    line (``"\\x00eof"`` at end of input); ``open_url`` opens an accepted URL-mode page
    (an ``https`` one only) in the browser, saying whether it could."""
    write(f"? MCP server {_shown(request.server, 64)} asks:\n")
    for line in printable(request.message).splitlines() or [""]:
        write(f"    {line}\n")
    try:
        if request.mode == "url":
            url = request.url or ""
            host = urllib.parse.urlsplit(url).hostname or "?"
            write(
                f"  it asks you to open a page on {_shown(host, 120)}:\n    {_shown(url, 2000)}\n"
            )
            choice = await _choose(write, read, "open it? [y]es, [n]o, [c]ancel: ", _YES_NO)
            if choice == "accept":
                if url.startswith("https://") and open_url(url):
                    write("  opening it in your browser\n")
                else:
                    write("  open the address above in your browser\n")
            return ElicitationAnswer(choice)
        choice = await _choose(write, read, "answer? [y]es, [n]o, [c]ancel: ", _YES_NO)
        if choice != "accept":
            return ElicitationAnswer(choice)
        return ElicitationAnswer("accept", await _fill(request.requested_schema or {}, write, read))
    except _Cancelled:
        return ElicitationAnswer("cancel")


_YES_NO = {"y": "accept", "yes": "accept", "n": "decline", "no": "decline", "c": "cancel"}


async def _choose(
    write: Callable[[str], None], read: ReadLine, prompt: str, table: dict[str, str]
) -> Any:
    while True:
        write(prompt)
        answer = await read()
        if answer == EOF:
            raise _Cancelled
        choice = table.get(answer.strip().lower())
        if choice is not None:
            return choice


async def _fill(
    schema: dict[str, Any], write: Callable[[str], None], read: ReadLine
) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    content: dict[str, Any] = {}
    for name, field in list(properties.items())[:MAX_FIELDS]:
        field = field if isinstance(field, dict) else {}
        value = await _field(str(name), field, str(name) in required, write, read)
        if value is not _SKIP:
            content[str(name)] = value
    return content


_SKIP = object()


async def _field(
    name: str, field: dict[str, Any], required: bool, write: Callable[[str], None], read: ReadLine
) -> Any:
    kind = _kind(field)
    multi = kind == "array"
    choices = _choices(field.get("items") if multi else field)
    hint = field.get("description") or field.get("title")
    label = _shown(name, 64) + (f" ({_shown(str(hint), MAX_SHOWN)})" if hint else "")
    if choices:
        shown = " | ".join(_shown(_choice_label(v, t), 60) for v, t in choices[:20])
        label += f" [{shown}]" + (", several separated by commas" if multi else "")
    elif kind == "boolean":
        label += " [y/n]"
    elif kind in ("integer", "number"):
        label += f" ({kind})"
    default = field.get("default")
    if default is not None:
        label += f" default {_shown(json_text(default), 60)}"
    if not required:
        label += ", optional"
    while True:
        write(f"  {label}: ")
        answer = await read()
        if answer == EOF:
            raise _Cancelled
        text = answer.strip()
        if not text:
            if default is not None:
                return default
            if not required:
                return _SKIP
            continue
        if multi:
            picked = [_pick(part.strip(), choices) for part in text.split(",") if part.strip()]
            value: Any = _SKIP if not picked or _SKIP in picked else picked
        elif choices:
            value = _pick(text, choices)
        else:
            value = _typed(text, kind)
        if value is not _SKIP:
            return value
        write("    not a valid answer here; try again\n")


def _choices(field: Any) -> list[tuple[Any, str | None]]:
    """A field's choices as ``(value, title)``: ``enum`` (with the legacy
    ``enumNames``), or ``oneOf``/``anyOf`` of ``{const, title}``."""
    if not isinstance(field, dict):
        return []
    enum = field.get("enum")
    if isinstance(enum, list) and enum:
        names = field.get("enumNames")
        names = names if isinstance(names, list) and len(names) == len(enum) else [None] * len(enum)
        return [(v, str(n) if n is not None else None) for v, n in zip(enum, names, strict=True)]
    for key in ("oneOf", "anyOf"):
        options = field.get(key)
        if isinstance(options, list):
            found = [
                (o["const"], str(o["title"]) if "title" in o else None)
                for o in options
                if isinstance(o, dict) and "const" in o
            ]
            if found:
                return found
    return []


def _choice_label(value: Any, title: str | None) -> str:
    return f"{value} ({title})" if title and title != str(value) else str(value)


def _pick(text: str, choices: list[tuple[Any, str | None]]) -> Any:
    """The choice whose value, or else whose title, is ``text``."""
    for value, _title in choices:
        if str(value) == text:
            return value
    for value, title in choices:
        if title is not None and title == text:
            return value
    return _SKIP


def _kind(field: dict[str, Any]) -> Any:
    """The field's type; for an optional one written ``anyOf: [{type}, {type: null}]``
    (as pydantic writes it), the type that is not null."""
    kind = field.get("type")
    if kind is None and isinstance(field.get("anyOf"), list):
        kinds = [
            option.get("type")
            for option in field["anyOf"]
            if isinstance(option, dict) and option.get("type") != "null"
        ]
        kind = kinds[0] if kinds else None
    return kind


def _typed(text: str, kind: Any) -> Any:
    if kind == "boolean":
        return {"y": True, "yes": True, "true": True, "n": False, "no": False, "false": False}.get(
            text.lower(), _SKIP
        )
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return _SKIP
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            return _SKIP
        return number if number == number and abs(number) != float("inf") else _SKIP
    return text


def _shown(text: str, limit: int) -> str:
    text = printable(text).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
