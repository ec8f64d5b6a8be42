"""Provider state of any shape never breaks a request.

An assistant message's reasoning and provider state come back from a transcript
(``$/assistant``, read on ``continueFrom``), which a torn write, a hand edit or a planted
file may have given any JSON shape the reader lets through: objects of anything. Every
built-in codec must still build its request from such a conversation, as plain JSON,
for its own model (which then judges the state) and for another (which never sees it).
"""

from __future__ import annotations

import json

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from cleveragents.tool import Message, Reasoning, ToolCall, ToolCallRouter

BUILTIN_CODECS = ("anthropic", "gemini", "openai", "openai_responses")
ORIGIN = "p:m"

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# The keys the codecs read, so the fuzz reaches their branches, beside any others.
known_keys = st.sampled_from(
    ["type", "id", "thinking", "signature", "data", "encrypted_content", "summary", "field",
     "thoughtSignature", "signedParts", "length", "after", "output", "texts", "text"]
)  # fmt: skip
states = st.dictionaries(known_keys | st.text(max_size=6), json_values, max_size=5)
optional_states = st.none() | states


@st.composite
def assistant_turns(draw: st.DrawFn) -> Message:
    texts = st.text(max_size=12)
    call_ids = draw(st.lists(st.sampled_from(["c1", "c2", "c3"]), unique=True, max_size=3))
    calls = [
        ToolCall(call_id, "t/echo", {"n": 1}, state=draw(optional_states)) for call_id in call_ids
    ]
    reasoning = draw(st.lists(st.builds(Reasoning, texts, optional_states), max_size=3))
    return Message(
        "assistant", draw(texts), calls, reasoning=reasoning, state=draw(optional_states),
        origin=ORIGIN,
    )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(turn=assistant_turns(), own=st.booleans())
def test_any_state_still_builds_a_plain_json_request_for_every_codec(
    turn: Message, own: bool
) -> None:
    history = [
        Message("user", "Echo."),
        turn,
        *(Message("tool", "1", tool_call_id=c.id, name=c.name) for c in turn.tool_calls),
        Message("user", "Again."),
    ]
    stateless = attrs.evolve(
        turn,
        tool_calls=[attrs.evolve(c, state=None) for c in turn.tool_calls],
        reasoning=[Reasoning(r.text) for r in turn.reasoning],
        state=None,
    )
    for codec in BUILTIN_CODECS:
        router = ToolCallRouter(codec, origin=ORIGIN if own else "q:other")
        built = router.messages(history).messages
        json.dumps(built, allow_nan=False)  # plain JSON, whatever came in
        if not own:  # another model's request does not depend on the state at all
            bare = [stateless if m is turn else m for m in history]
            assert built == router.messages(bare).messages
