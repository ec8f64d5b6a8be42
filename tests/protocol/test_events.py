"""Run events on the wire: each core event class has its notification, and the text the
encoder makes (once, for the transcript and the LSP face alike) is exactly the wire
class's own JSON for that event."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cleveragents.protocol import RUN_EVENTS, EventEncoder, dumps, unstructure, wire_notification
from cleveragents.tool import (
    Checkpointed,
    Compacted,
    IterationFinished,
    IterationStarted,
    MessageDelta,
    ReasoningDelta,
    RunError,
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallRecord,
    ToolCallStarted,
    Usage,
)

RECORD = ToolCallRecord("t/x", {"a": 1}, {"ok": True}, 1.5, True, None, 2, "c1", None)
SAMPLES: list[RunEvent] = [
    RunStarted("/ws", 25, ["t/x"], run_id="r", seq=1),
    ReasoningDelta(2, "hmm, t/x", run_id="r", seq=2),
    MessageDelta(2, "héllo", run_id="r", seq=2),
    ToolCallStarted(2, "c1", "t/x", {"a": [1, None]}, run_id="r", seq=3),
    ToolCallFinished(RECORD, run_id="r", seq=4),
    IterationFinished(2, "text", 1, 3.25, Usage(10, 4), run_id="r", seq=5),
    IterationFinished(2, "text", 1, 3.25, Usage(10, 4, 8, 0, 3), run_id="r", seq=5),
    IterationFinished(3, "", 0, 0.5, None, run_id="r", seq=6),
    IterationFinished(4, "", 0, 0.5, None, 3_000, 128_000, run_id="r", seq=7),
    Compacted(5, "prune", 1000, 300, 0, run_id="r", seq=8),
    ToolCallProgress("c1", 40, 100.0, "indexing", run_id="r", seq=9),
    ToolCallProgress("c1", 0.5, run_id="r", seq=10),
    Checkpointed(2, "0123456789abcdef", 3, run_id="r", seq=11),
]


def test_every_core_run_event_but_iteration_started_has_its_notification() -> None:
    assert set(RUN_EVENTS) == {
        RunStarted, ReasoningDelta, MessageDelta, ToolCallStarted, ToolCallFinished,
        IterationFinished, Compacted, RunFinished, ToolCallProgress, Checkpointed,
    }  # fmt: skip
    assert wire_notification(IterationStarted(1)) is None
    assert EventEncoder().encode(IterationStarted(1)) is None


def test_the_encoded_text_is_the_wire_class_s_own_json() -> None:
    encoder = EventEncoder()
    for event in SAMPLES:
        found = wire_notification(event)
        assert found is not None
        method, notification = found
        assert encoder.encode(event) == (method, dumps(unstructure(notification)))
    finished = json.loads(encoder.encode(SAMPLES[5])[1])  # type: ignore[index]
    assert finished["usage"] == {"inputTokens": 10, "outputTokens": 4}  # unknown counts absent
    cached = json.loads(encoder.encode(SAMPLES[6])[1])  # type: ignore[index]
    assert cached["usage"] == {
        "inputTokens": 10, "outputTokens": 4, "cacheReadTokens": 8, "cacheWriteTokens": 0,
        "reasoningTokens": 3,
    }  # fmt: skip
    assert "usage" not in json.loads(encoder.encode(SAMPLES[7])[1])  # type: ignore[index]


@given(
    text=st.text(min_size=1),
    inputs=st.dictionaries(st.text(), st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=8)),
)  # fmt: skip
def test_any_text_and_arguments_encode_as_their_wire_class_does(
    text: str, inputs: dict[str, Any]
) -> None:
    encoder = EventEncoder()
    for event in (MessageDelta(1, text, run_id="r", seq=1),
                  ToolCallStarted(1, "c", "t/x", inputs, run_id="r", seq=2)):  # fmt: skip
        found = wire_notification(event)
        assert found is not None
        assert encoder.encode(event) == (found[0], dumps(unstructure(found[1])))


async def test_run_finished_carries_the_result_with_the_records_texts_as_sent() -> None:
    encoder = EventEncoder()
    _, sent = encoder.encode(ToolCallFinished(RECORD, run_id="r", seq=1)) or ("", "")
    result = RunResult("r", "failed", "", [RECORD], 1, False, 9.5, RunError(-32029, "disk"))
    method, params, text = await encoder.encode_finished(RunFinished(result, run_id="r", seq=2))
    assert method == "run/finished"
    assert json.loads(params)["result"] == json.loads(text)
    body = json.loads(text)
    assert body["toolCallHistory"] == [json.loads(sent)["record"]]
    assert body["error"] == {"code": -32029, "message": "disk"}
    assert "usage" not in body
