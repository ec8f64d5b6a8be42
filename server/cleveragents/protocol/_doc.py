"""The field tables of ``client-protocol/PROTOCOL.md``, generated from the schema document.

Each wire type's table sits between two markers, and only what is between them is
generated; the prose around them is written by hand::

    <!-- generated: RunResult -->
    | field | type | required | meaning |
    ...
    <!-- end generated -->

The meaning column is the field's description in the schema (its docstring, with code
spans: ``markdownDescription`` when there is one), with ``PROTOCOL.md §N`` turned into a
link to that section. This module knows
Markdown and the document's markers, nothing of attrs: it reads only the schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

DOC_NAME = "PROTOCOL.md"
END = "<!-- end generated -->"
HEADER = "| field | type | required | meaning |\n|---|---|---|---|\n"

_BLOCK = re.compile(r"<!-- generated: (\w+) -->\n(.*?)" + re.escape(END), re.S)
_SECTION_HEADING = re.compile(r"^## (\d+)\. .*$", re.M)
_SECTION_CITE = re.compile(r"PROTOCOL\.md §(\d+)")
_SCALARS = {"string", "integer", "number", "boolean", "null"}


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to ``-``."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of the document: its headings' and its ``<a id="...">`` tags'."""
    found = {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"></a>', text))


def blocks(text: str) -> list[str]:
    """The type names of the generated blocks, in document order."""
    return [match.group(1) for match in _BLOCK.finditer(text)]


def type_expr(schema: dict[str, Any]) -> str:
    """A property's type, as the tables write it."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[`{name}`](#{name.lower()})"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    if "anyOf" in schema:
        return " \\| ".join(type_expr(branch) for branch in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array":
        item = type_expr(schema["items"])
        return f"({item})[]" if "|" in item else f"{item}[]"
    if kind == "object":
        values = schema.get("additionalProperties")
        return f"object of {type_expr(values)}" if isinstance(values, dict) else "object"
    if kind in _SCALARS:
        return str(kind)
    if not schema.keys() - {"description", "markdownDescription"}:
        return "any JSON"
    raise ValueError(f"no table form for the schema {schema!r}")


def _meaning(description: str, sections: dict[str, str]) -> str:
    text = description.replace("|", "\\|")

    def link(match: re.Match[str]) -> str:
        anchor = sections.get(match.group(1))
        return f"[§{match.group(1)}](#{anchor})" if anchor else match.group(0)

    return _SECTION_CITE.sub(link, text)


def _description(schema: dict[str, Any]) -> str:
    return str(schema.get("markdownDescription", schema.get("description", "")))


def table(definition: dict[str, Any], sections: dict[str, str]) -> str:
    """One type's table (or a line saying it has no fields)."""
    properties: dict[str, Any] = definition.get("properties", {})
    if not properties:
        return "No fields: the object is always `{}`.\n"
    required = set(definition.get("required", ()))
    rows = [
        f"| `{name}` | {type_expr(schema)} | {'yes' if name in required else 'no'} | "
        f"{_meaning(_description(schema), sections)} |\n"
        for name, schema in properties.items()
    ]
    return HEADER + "".join(rows)


def refresh(text: str, document: dict[str, Any]) -> str:
    """``text`` with every generated block rewritten from ``document``'s ``$defs``."""
    defs: dict[str, Any] = document["$defs"]
    sections = {m.group(1): slug(m.group(0)[3:]) for m in _SECTION_HEADING.finditer(text)}

    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in defs:
            raise ValueError(f"{DOC_NAME} has a generated table for {name}, not a wire type")
        return f"<!-- generated: {name} -->\n{table(defs[name], sections)}{END}"

    return _BLOCK.sub(render, text)
