"""A tool's schemas are checked against the JSON Schema meta-schema when the spec is built:
a malformed one is refused naming its keyword, and a remote ``$ref`` is never fetched."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleveragents.tool import SchemaDefinitionError, ToolInputError, ToolSpec


def _spec(input_schema: Any, output_schema: Any = None) -> ToolSpec:
    return ToolSpec("t/x", "X.", input_schema, lambda inputs: None, output_schema=output_schema)


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        ({"type": "object", "properties": []}, "properties"),
        ({"type": 5}, "type"),
        ({"required": "name"}, "required"),
        ({"properties": {"a": {"type": "string", "pattern": "(unclosed"}}}, "properties.a.pattern"),
        ({"properties": {"a": {"minLength": -1}}}, "properties.a.minLength"),
    ],
)
def test_a_malformed_input_schema_is_refused_naming_its_keyword(schema: Any, path: str) -> None:
    with pytest.raises(SchemaDefinitionError) as caught:
        _spec(schema)
    assert (caught.value.field, caught.value.path) == ("input_schema", path)
    assert f"input_schema.{path} " in str(caught.value)


def test_a_malformed_output_schema_says_it_is_the_output_schema() -> None:
    with pytest.raises(SchemaDefinitionError) as caught:
        _spec({"type": "object"}, {"type": "nonsense"})
    assert (caught.value.field, caught.value.path) == ("output_schema", "type")


def test_a_remote_ref_is_refused_not_fetched() -> None:
    # Port 9 on loopback (discard) is closed here: a fetch would fail differently or hang.
    with pytest.raises(SchemaDefinitionError, match="not fetched"):
        _spec({"$ref": "http://127.0.0.1:9/schema.json"})


def test_local_refs_and_ordinary_schemas_still_compile() -> None:
    spec = _spec({"type": "object", "properties": {"a": {"$ref": "#/definitions/s"}},
                  "definitions": {"s": {"type": "string", "pattern": "^[a-z]+$"}}})  # fmt: skip
    spec.validate_input({"a": "abc"})
    with pytest.raises(ToolInputError, match=r"arguments\.a must match pattern"):
        spec.validate_input({"a": "ABC"})


@given(schema=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.sampled_from(["object", "string", "array", "integer", "#/definitions/x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "properties", "items", "required", "enum", "minimum",
                         "pattern", "additionalProperties", "$ref", "anyOf", "x"]),
        inner, max_size=4),
    max_leaves=12))  # fmt: skip
def test_the_generated_meta_schema_validator_decides_as_a_fresh_compile(schema: Any) -> None:
    """The checked-in validator (scripts/gen-validators) accepts and refuses exactly what
    a fresh compile of the draft-7 meta-schema does, whatever fastjsonschema is installed."""
    import fastjsonschema

    from cleveragents.tool._draft7 import DRAFT_07
    from cleveragents.tool._draft7_validator import (
        validate_http___json_schema_org_draft_07_schema as generated,
    )

    if "v" not in _FRESH:  # compiled once for all examples
        _FRESH["v"] = fastjsonschema.compile(DRAFT_07, use_default=False)
    fresh = _FRESH["v"]
    outcomes = []
    for validate in (generated, fresh):
        try:
            validate(schema)
            outcomes.append(None)
        except fastjsonschema.JsonSchemaValueException as exc:
            outcomes.append((exc.rule, exc.path))
    assert outcomes[0] == outcomes[1]


_FRESH: dict[str, Any] = {}
