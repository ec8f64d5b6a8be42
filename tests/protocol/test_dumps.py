"""The wire's JSON text: exactly what the standard encoder writes, refusals included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleveragents.protocol import dumps

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)  # fmt: skip


def standard(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@given(JSON)
def test_the_text_is_the_standard_encoder_s(value: Any) -> None:
    assert dumps(value) == standard(value)


@pytest.mark.parametrize("value", [float("nan"), [1, float("inf")], {"x": -float("inf")}])
def test_non_finite_numbers_are_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="Out of range float"):
        dumps(value)


def test_what_is_not_json_is_refused_and_a_cycle_is_named() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(loop)
