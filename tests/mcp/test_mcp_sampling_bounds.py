"""A sampling request's settings, as any server may send them: ``maxTokens``,
``temperature`` and ``stopSequences`` are taken within their bounds or refused with a
message naming the field; ``modelPreferences``, ``includeContext`` and ``metadata``,
advisory, never refuse a request whatever they hold."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleveragents.mcp import SamplingRefused
from cleveragents.mcp._hooks import (
    MAX_STOP_SEQUENCE_CHARS,
    MAX_STOP_SEQUENCES,
    MAX_TEMPERATURE,
    read_sampling,
)

TEXT = {"type": "text", "text": "hi"}
MESSAGES = [{"role": "user", "content": TEXT}]
ANY = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=300)


@settings(max_examples=150, deadline=None)
@given(
    max_tokens=ANY,
    temperature=ANY,
    stop=ANY | st.lists(ANY, max_size=20),
    extra=st.dictionaries(st.sampled_from(["modelPreferences", "includeContext", "metadata"]), ANY),
)
def test_any_settings_are_taken_within_bounds_or_refused(
    max_tokens: Any, temperature: Any, stop: Any, extra: dict[str, Any]
) -> None:
    params = {"messages": MESSAGES, "maxTokens": max_tokens, "temperature": temperature,
              "stopSequences": stop, **extra}  # fmt: skip
    refusal: str | None
    try:
        request = read_sampling("s", params)
    except SamplingRefused as exc:
        refusal = str(exc)
    else:
        refusal = None
    if refusal is not None:  # naming the field
        assert refusal.startswith(("maxTokens:", "temperature:", "stopSequences"))
        return
    assert isinstance(request.max_tokens, int)
    assert request.max_tokens >= 1
    assert request.temperature is None or 0 <= request.temperature <= MAX_TEMPERATURE
    assert len(request.stop_sequences) <= MAX_STOP_SEQUENCES
    assert all(
        isinstance(s, str) and 0 < len(s) <= MAX_STOP_SEQUENCE_CHARS for s in request.stop_sequences
    )


@pytest.mark.parametrize(
    ("field", "value", "taken"),
    [
        ("maxTokens", 1, 1),
        ("temperature", 0, 0.0),
        ("temperature", 2, 2.0),
        ("stopSequences", ["END", "\n\n"], ("END", "\n\n")),
        ("modelPreferences", {"hints": [{"name": "claude"}]}, None),
        ("includeContext", "allServers", None),
    ],
)
def test_valid_settings_are_taken_as_sent(field: str, value: Any, taken: Any) -> None:
    request = read_sampling("s", {"messages": MESSAGES, "maxTokens": 9, field: value})
    seen = {"maxTokens": request.max_tokens, "temperature": request.temperature,
            "stopSequences": request.stop_sequences}.get(field)  # fmt: skip
    assert seen == taken


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("maxTokens", None), ("maxTokens", 0), ("maxTokens", -5), ("maxTokens", True),
        ("maxTokens", 2.5), ("temperature", -0.1), ("temperature", 2.01),
        ("temperature", float("nan")), ("temperature", "hot"), ("stopSequences", "END"),
        ("stopSequences", ["ok", 3]), ("stopSequences", ["x" * 201]),
    ],
)  # fmt: skip
def test_invalid_settings_are_refused_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(SamplingRefused, match=f"^{field}"):
        read_sampling("s", {"messages": MESSAGES, "maxTokens": 9, field: value})
