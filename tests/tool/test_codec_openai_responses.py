"""The OpenAI Responses codec (``ToolCallRouter("openai_responses")``): function tools,
input items, and the typed events of a streamed response, each checked by full-object
equality against a literal payload.

The pairing rules it keeps (a ``function_call`` sent with its ``fc_`` id needs its
reasoning item before it; a reasoning item needs its following item by id; with
``store: false`` a reasoning item goes back only with its ``encrypted_content``) are the
API's, quoted with their sources in ``tests/kit/fake_openai.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from toolkit import HISTORY, SCHEMAS

from cleveragents.tool import (
    LLMResponse,
    Message,
    ProviderStreamError,
    Reasoning,
    ToolCall,
    ToolCallRouter,
    Usage,
)

ROUTER = "openai_responses"
RS = {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan."}],
      "encrypted_content": "gAAAA1"}  # fmt: skip


def test_tools_are_function_tools_sent_not_strict() -> None:
    assert ToolCallRouter(ROUTER).tools(SCHEMAS) == [
        {"type": "function", "name": "builtin__file-read", "description": "Read a file.",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                        "required": ["path"]},
         "strict": False},
        {"type": "function", "name": "server_-clocal__tool", "description": "A server tool.",
         "parameters": {"type": "object"}, "strict": False},
    ]  # fmt: skip


def test_a_history_without_state_is_messages_calls_and_outputs() -> None:
    assert ToolCallRouter(ROUTER).messages(HISTORY).messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read a.txt"},
        {"role": "assistant", "content": "Reading."},
        {"type": "function_call", "call_id": "c1", "name": "builtin__file-read",
         "arguments": '{"path": "a.txt"}'},
        {"type": "function_call", "call_id": "c2", "name": "server_-clocal__tool",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "hello"},
        {"type": "function_call_output", "call_id": "c2", "output": "boom"},
        {"role": "assistant", "content": "It says hello."},
    ]  # fmt: skip


def _events(*events: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


FC = {"id": "fc_1", "type": "function_call", "call_id": "call_a", "name": "builtin__file-read",
      "arguments": '{"path": "a.txt"}', "status": "completed"}  # fmt: skip
MSG = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
       "content": [{"type": "output_text", "text": "Reading.", "annotations": []}]}  # fmt: skip
USAGE = {"input_tokens": 2000, "input_tokens_details": {"cached_tokens": 1536},
         "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 256},
         "total_tokens": 2300}  # fmt: skip
STREAM = _events(
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0,
     "item": {"id": "rs_1", "type": "reasoning", "summary": []}},
    {"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0},
    {"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0,
     "delta": "Pl"},
    {"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0,
     "delta": "an."},
    {"type": "response.output_item.done", "output_index": 0, "item": RS},
    {"type": "response.output_item.added", "output_index": 1,
     "item": {**MSG, "content": [], "status": "in_progress"}},
    {"type": "response.output_text.delta", "output_index": 1, "content_index": 0,
     "delta": "Reading."},
    {"type": "response.output_item.done", "output_index": 1, "item": MSG},
    {"type": "response.output_item.added", "output_index": 2,
     "item": {**FC, "arguments": "", "status": "in_progress"}},
    {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": '{"path": '},
    {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": '"a.txt"}'},
    {"type": "response.output_item.done", "output_index": 2, "item": FC},
    {"type": "response.completed",
     "response": {"id": "resp_1", "status": "completed", "output": [RS, MSG, FC],
                  "usage": USAGE}},
)  # fmt: skip
EXPECTED = LLMResponse(
    content="Reading.",
    tool_calls=[ToolCall("call_a", "builtin/file-read", {"path": "a.txt"}, state={"id": "fc_1"})],
    usage=Usage(2000, 300, cache_read_tokens=1536, reasoning_tokens=256),
    stop_reason="completed",
    reasoning=[Reasoning("Plan.", RS)],
    state={"output": ["rs_1", "msg_1", "fc_1"], "texts": {"msg_1": "Reading."}},
)


def test_a_stream_gives_text_reasoning_the_whole_item_and_the_order_of_the_output() -> None:
    accumulator = ToolCallRouter(ROUTER).stream(iteration=1)
    said = []
    for chunk in STREAM:
        text = accumulator.feed(chunk)
        said.append((accumulator.take_reasoning(), text))
    assert [s for s in said if s != ("", "")] == [("Pl", ""), ("an.", ""), ("", "Reading.")]
    assert accumulator.result() == EXPECTED


def test_a_whole_response_reads_as_its_stream() -> None:
    payload = {"id": "resp_1", "status": "completed", "output": [RS, MSG, FC], "usage": USAGE}
    assert ToolCallRouter(ROUTER).parse_response(payload, iteration=1) == EXPECTED


def test_an_answer_goes_back_as_it_came_each_item_after_its_reasoning() -> None:
    answer = EXPECTED
    message = Message("assistant", answer.content, answer.tool_calls,
                      reasoning=answer.reasoning, state=answer.state)  # fmt: skip
    assert ToolCallRouter(ROUTER).messages([message]).messages == [
        RS,
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Reading.", "annotations": []}]},
        {"type": "function_call", "call_id": "call_a", "name": "builtin__file-read",
         "arguments": '{"path": "a.txt"}', "id": "fc_1"},
    ]  # fmt: skip


def test_reasoning_without_its_encrypted_content_keeps_no_state_and_its_calls_no_ids() -> None:
    bare = {"id": "rs_1", "type": "reasoning", "summary": []}
    accumulator = ToolCallRouter(ROUTER).stream(iteration=1)
    for chunk in _events(
        {"type": "response.output_item.done", "output_index": 0, "item": bare},
        {"type": "response.output_item.done", "output_index": 1, "item": FC},
        {"type": "response.completed", "response": {"status": "completed", "usage": USAGE}},
    ):  # fmt: skip
        accumulator.feed(chunk)
    answer = accumulator.result()
    assert (answer.reasoning, answer.state, answer.tool_calls[0].state) == ([], None, None)
    message = Message("assistant", "", answer.tool_calls)
    assert ToolCallRouter(ROUTER).messages([message]).messages == [
        {"type": "function_call", "call_id": "call_a", "name": "builtin__file-read",
         "arguments": '{"path": "a.txt"}'}
    ]  # fmt: skip


def test_items_after_a_reasoning_item_that_cannot_go_back_lose_their_ids() -> None:
    second = {"id": "rs_2", "type": "reasoning", "summary": []}  # no encrypted content
    calls = [ToolCall("call_a", "t", {}, state={"id": "fc_1"}),
             ToolCall("call_b", "t", {}, state={"id": "fc_2"})]  # fmt: skip
    message = Message(
        "assistant", "", calls, reasoning=[Reasoning("Plan.", RS), Reasoning("", second)],
        state={"output": ["rs_1", "fc_1", "rs_2", "fc_2"], "texts": {}},
    )  # fmt: skip
    assert ToolCallRouter(ROUTER).messages([message]).messages == [
        RS,
        {"type": "function_call", "call_id": "call_a", "name": "t", "arguments": "{}",
         "id": "fc_1"},
        {"type": "function_call", "call_id": "call_b", "name": "t", "arguments": "{}"},
    ]  # fmt: skip


def test_another_models_items_go_without_reasoning_or_ids() -> None:
    message = Message("assistant", EXPECTED.content, EXPECTED.tool_calls,
                      reasoning=EXPECTED.reasoning, state=EXPECTED.state,
                      origin="openai-responses:gpt-a")  # fmt: skip
    router = ToolCallRouter(ROUTER, origin="openai-responses:gpt-b")
    assert router.messages([message]).messages == [
        {"role": "assistant", "content": "<thinking>\nPlan.\n</thinking>\n\nReading."},
        {"type": "function_call", "call_id": "call_a", "name": "builtin__file-read",
         "arguments": '{"path": "a.txt"}'},
    ]  # fmt: skip


def test_an_answer_without_reasoning_carries_no_state() -> None:
    accumulator = ToolCallRouter(ROUTER).stream(iteration=1)
    for chunk in _events(
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"},
        {"type": "response.output_item.done", "output_index": 0, "item": MSG},
        {"type": "response.output_item.done", "output_index": 1, "item": FC},
        {"type": "response.completed", "response": {"status": "completed"}},
    ):  # fmt: skip
        accumulator.feed(chunk)
    answer = accumulator.result()
    assert (answer.state, answer.reasoning, answer.tool_calls[0].state) == (None, [], None)
    assert answer.usage == Usage(0, 0)


def test_summary_parts_read_as_paragraphs() -> None:
    accumulator = ToolCallRouter(ROUTER).stream(iteration=1)
    for number, text in enumerate(["First.", "Second."]):
        accumulator.feed({"type": "response.reasoning_summary_part.added", "output_index": 0,
                          "summary_index": number})  # fmt: skip
        accumulator.feed({"type": "response.reasoning_summary_text.delta", "output_index": 0,
                          "summary_index": number, "delta": text})  # fmt: skip
    assert accumulator.take_reasoning() == "First.\n\nSecond."


def test_an_incomplete_response_says_why_it_stopped() -> None:
    accumulator = ToolCallRouter(ROUTER).stream(iteration=1)
    accumulator.feed({"type": "response.incomplete", "response": {
        "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}})  # fmt: skip
    assert accumulator.result().stop_reason == "max_output_tokens"


@pytest.mark.parametrize(
    ("chunk", "kind", "detail"),
    [
        ({"type": "response.failed", "response": {"status": "failed", "error": {
            "code": "server_error", "message": "The model failed."}}},
         "server_error", "The model failed."),
        ({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.",
          "param": None}, "rate_limit_exceeded", "Slow down."),
    ],
)  # fmt: skip
def test_a_failed_response_and_an_error_event_raise_the_providers_error(
    chunk: dict[str, Any], kind: str, detail: str
) -> None:
    with pytest.raises(ProviderStreamError) as info:
        ToolCallRouter(ROUTER).stream(iteration=1).feed(chunk)
    assert (info.value.kind, info.value.detail) == (kind, detail)
