"""What a server sends to be asked, shown or counted is untrusted: any JSON at the seam
(elicitation and sampling params, progress numbers, tool output blocks) is either taken
within its bounds or refused with the documented error, never anything else, and never
lets base64 into the text a model reads."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cleveragents.mcp import SamplingRefused
from cleveragents.mcp._hooks import (
    MAX_MESSAGE_CHARS,
    MAX_SAMPLING_CHARS,
    ProgressGate,
    read_elicitation,
    read_sampling,
)
from cleveragents.tool import result_message

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=30,
)
KEYS = st.sampled_from(
    ["mode", "message", "requestedSchema", "url", "elicitationId", "messages", "tools",
     "systemPrompt", "maxTokens", "type", "text", "role", "content", "data", "mimeType"]
)  # fmt: skip
PARAMS = st.dictionaries(KEYS, JSON | st.lists(st.dictionaries(KEYS, JSON), max_size=4), max_size=6)


@settings(max_examples=80, deadline=None)
@given(PARAMS)
def test_any_elicitation_params_are_read_or_refused_with_a_value_error(
    params: dict[str, Any],
) -> None:
    try:
        request = read_elicitation("s", params)
    except ValueError:
        return
    assert len(request.message) <= MAX_MESSAGE_CHARS
    assert request.mode in ("form", "url")
    assert (request.url is not None) == (request.mode == "url")


@settings(max_examples=80, deadline=None)
@given(PARAMS)
def test_any_sampling_params_are_read_or_refused_saying_why(params: dict[str, Any]) -> None:
    try:
        request = read_sampling("s", params)
    except SamplingRefused as exc:
        refusal = str(exc)
    else:
        refusal = None
    if refusal is not None:
        assert refusal  # a refusal always says why
        return
    assert request.messages
    assert sum(len(text) for _role, text in request.messages) <= MAX_SAMPLING_CHARS
    assert all(role in ("user", "assistant") for role, _text in request.messages)
    assert request.max_tokens > 0


BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "audio", "resource", "other"])},
    optional={
        "text": JSON,
        "data": st.text(max_size=40) | JSON,
        "mimeType": st.text(max_size=20) | JSON,
    },
)


@settings(max_examples=80, deadline=None)
@given(st.lists(BLOCK, max_size=6) | JSON)
def test_any_output_becomes_a_message_whose_media_are_valid(output: Any) -> None:
    message = result_message(output, "c1", "t/x")
    assert isinstance(message.content, str)
    for medium in message.media:
        assert medium.media_type.startswith(medium.kind + "/")
        assert medium.data not in message.content or len(medium.data) < 8


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True) | st.integers(),
                          st.none() | st.floats(allow_nan=True), st.none() | st.text(max_size=900)),
                max_size=50))  # fmt: skip
def test_any_progress_flood_comes_out_increasing_finite_and_bounded(
    steps: list[tuple[float, float | None, str | None]],
) -> None:
    out: list[tuple[float, float | None, str | None]] = []

    async def flood() -> None:
        gate = ProgressGate(lambda *event: out.append(event), interval=0.05)
        for step in steps:
            gate(*step)
        gate.close()
        gate(1e9, None, None)  # nothing after the call ended

    asyncio.run(flood())
    assert len(out) <= 2  # the first at once, the latest at the end: no sleep between
    progress = [p for p, _t, _m in out]
    assert progress == sorted(progress)
    assert all(math.isfinite(p) for p in progress)
    assert all(t is None or math.isfinite(t) for _p, t, _m in out)
    assert all(m is None or len(m) <= 500 for _p, _t, m in out)
    assert 1e9 not in progress
