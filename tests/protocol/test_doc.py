"""PROTOCOL.md's field tables are generated from the schema document and kept fresh."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cleveragents.protocol._doc import anchors, blocks, refresh, slug, type_expr
from cleveragents.protocol._schema import protocol_schema

DOC = Path(__file__).resolve().parents[2] / "client-protocol" / "PROTOCOL.md"


def test_the_field_tables_in_protocol_md_are_up_to_date() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert refresh(text, protocol_schema()) == text, "run scripts/gen-schema and commit"


def test_every_wire_type_has_exactly_one_table() -> None:
    named = blocks(DOC.read_text(encoding="utf-8"))
    assert sorted(named) == sorted(protocol_schema()["$defs"])


def test_every_link_in_the_tables_lands_on_an_anchor() -> None:
    text = DOC.read_text(encoding="utf-8")
    generated = "".join(re.findall(r"<!-- generated: \w+ -->\n(.*?)<!-- end", text, re.S))
    targets = set(re.findall(r"\]\(#([^)]+)\)", generated))
    assert len(targets) > 10
    assert targets - anchors(text) == set()


DOCUMENT = {
    "$defs": {
        "Thing": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "description": "How big, see PROTOCOL.md §2."},
                "tags": {
                    "type": "array",
                    "items": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/Other"}]},
                    "description": "Labels | markers",
                    "markdownDescription": "`Labels` | markers",
                },
                "raw": {},
            },
            "required": ["size"],
        },
        "Nothing": {"type": "object", "properties": {}},
    }
}


def test_refresh_rewrites_only_between_the_markers() -> None:
    text = (
        "# Spec\n\n## 2. Transport and framing\n\nProse before.\n\n"
        "<!-- generated: Thing -->\n| old | table |\n<!-- end generated -->\n\nProse after.\n"
        "<!-- generated: Nothing -->\n<!-- end generated -->\n"
    )
    assert refresh(text, DOCUMENT) == (
        "# Spec\n\n## 2. Transport and framing\n\nProse before.\n\n"
        "<!-- generated: Thing -->\n"
        "| field | type | required | meaning |\n|---|---|---|---|\n"
        "| `size` | integer | yes | How big, see [§2](#2-transport-and-framing). |\n"
        "| `tags` | (string \\| [`Other`](#other))[] | no | `Labels` \\| markers |\n"
        "| `raw` | any JSON | no |  |\n"
        "<!-- end generated -->\n\nProse after.\n"
        "<!-- generated: Nothing -->\nNo fields: the object is always `{}`.\n"
        "<!-- end generated -->\n"
    )


def test_a_table_for_a_type_the_schema_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="Gone"):
        refresh("<!-- generated: Gone -->\n<!-- end generated -->\n", DOCUMENT)


def test_types_read_as_the_tables_write_them() -> None:
    assert type_expr({"enum": ["a", "b"]}) == '`"a"` \\| `"b"`'
    assert type_expr({"type": "object", "additionalProperties": {"type": "string"}}) == (
        "object of string"
    )
    assert type_expr({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == "integer \\| null"


def test_a_heading_slug_is_githubs() -> None:
    assert slug("7. Client → daemon requests") == "7-client--daemon-requests"
    assert slug("13. Client tools: `tools/call`") == "13-client-tools-toolscall"


def test_every_error_class_on_the_wire_has_a_row_in_the_error_codes_section() -> None:
    from cleveragents._codegen import wire_errors

    text = DOC.read_text(encoding="utf-8")
    missing = [
        f"{cls.code} {cls.__name__}"
        for cls in wire_errors()
        if f"| {cls.code} | `{cls.__name__}` |" not in text
    ]
    assert missing == []
