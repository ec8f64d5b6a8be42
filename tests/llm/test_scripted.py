"""The scripted model: turns by iteration, the last one repeating, strict loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cleveragents.llm.errors import ModelConfigError
from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import (
    CancelToken,
    LLMRequest,
    LLMResponse,
    Reasoning,
    ToolActorContext,
    ToolCall,
    Usage,
)


def ask(model: ScriptedModel, iteration: int, deltas: list[str] | None = None) -> LLMResponse:
    sink = deltas if deltas is not None else []
    return model(LLMRequest([], (), iteration, ToolActorContext(), CancelToken(), sink.append))


def test_turn_n_answers_iteration_n_and_the_last_turn_repeats() -> None:
    model = ScriptedModel([{"toolCalls": [{"name": "t", "arguments": {"a": 1}, "id": "x"}]},
                           {"content": "done"}])  # fmt: skip
    assert ask(model, 1) == LLMResponse("", [ToolCall("x", "t", {"a": 1})])
    assert ask(model, 2) == LLMResponse("done", [])
    assert ask(model, 7) == LLMResponse("done", [])


def test_content_is_reported_as_one_delta_and_ids_are_deterministic() -> None:
    deltas: list[str] = []
    model = ScriptedModel([{"content": "hi", "tool_calls": [{"name": "t", "arguments": {}}]}])
    response = ask(model, 3, deltas)
    assert deltas == ["hi"]
    assert response.tool_calls[0].id == "call_3_0"


def test_loading_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "turns.json"
    path.write_text(json.dumps([{"content": "from file"}]))
    assert ask(ScriptedModel.from_file(path), 1).content == "from file"


@pytest.mark.parametrize(
    ("text", "words"),
    [(None, "not found"), ("{", "is not JSON"), ('{"content": "x"}', "a JSON list")],
)
def test_a_bad_file_is_an_error_that_names_it(tmp_path: Path, text: str | None, words: str) -> None:
    path = tmp_path / "turns.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ModelConfigError) as info:
        ScriptedModel.from_file(path)
    assert words in info.value.message
    assert str(path) in info.value.message


@pytest.mark.parametrize(
    ("turns", "words"),
    [
        ([], "non-empty"),
        (["text"], "turn 0 must be an object"),
        ([{"contents": "typo"}], "unknown field 'contents'"),
        ([{"toolCalls": [{"arguments": {}}]}], "toolCalls[0] needs a string 'name'"),
        ([{"toolCalls": [{"name": "t", "arguments": [1]}]}], "arguments must be a JSON object"),
        ([{"reasoning": ["x"]}], "reasoning must be a string"),
        ([{"usage": {"inputTokens": 1}}], "usage needs 'outputTokens'"),
        ([{"usage": {"inputTokens": 1, "outputTokens": -1}}], "'outputTokens' must be a whole"),
        ([{"usage": {"inputTokens": 1, "outputTokens": 1, "cached": 1}}], "unknown field 'cached'"),
    ],
)
def test_malformed_turns_are_refused_with_the_place(turns: Any, words: str) -> None:
    with pytest.raises(ModelConfigError) as info:
        ScriptedModel(turns)
    assert words in info.value.message


def test_a_turns_reasoning_streams_before_its_content_and_its_usage_is_reported() -> None:
    said: list[tuple[str, str]] = []
    model = ScriptedModel([{"reasoning": "think", "content": "say",
                            "usage": {"inputTokens": 9, "outputTokens": 2, "cacheReadTokens": 4}}])  # fmt: skip
    request = LLMRequest(
        [], (), 1, ToolActorContext(), CancelToken(),
        lambda text: said.append(("text", text)), lambda text: said.append(("reasoning", text)),
    )  # fmt: skip
    response = model(request)
    assert said == [("reasoning", "think"), ("text", "say")]
    assert response.reasoning == [Reasoning("think")]
    assert response.usage == Usage(9, 2, 4)
    assert model(request).usage is not response.usage  # each answer has its own object
