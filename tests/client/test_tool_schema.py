"""``function_schema``: a tool's input schema from type hints and docstring."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest

from cleveragents.client._schema import function_schema, hint_schema


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (bool, {"type": "boolean"}),
        (float, {"type": "number"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (Colour, {"enum": ["red", "blue"]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Annotated[str, "a path"], {"type": "string", "description": "a path"}),
    ],
)
def test_each_supported_hint_maps_to_its_json_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert hint_schema(hint) == schema


def test_sphinx_docstrings_describe_parameters_and_kwargs_allow_extra_properties() -> None:
    def find(pattern: str, *, limit: int = 10, **more: Any) -> list[str]:
        """Find files
        matching a pattern.

        :param pattern: a glob
        :param limit: at most this many
        """
        return []

    description, schema = function_schema(find)
    assert description == "Find files matching a pattern."
    assert schema == {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "a glob"},
            "limit": {"type": "integer", "description": "at most this many", "default": 10},
        },
        "required": ["pattern"],
    }


def test_a_hint_without_a_json_schema_is_a_type_error_naming_the_parameter() -> None:
    def bad(when: complex) -> None:
        """Nope."""

    with pytest.raises(TypeError, match=r"'when'.*input_schema="):
        function_schema(bad)
    with pytest.raises(TypeError, match=r"dict\[str"):
        hint_schema(dict[int, str])
