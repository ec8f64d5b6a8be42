"""Reasoning and provider state through the run service, with no face: reasoning streams
as its own event before the text, usage carries the cache and reasoning counts, the
opaque state a provider needs back is kept in the conversation and the transcript (and
only there), and a conversation continued after a restart sends it back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.tool import (
    AssistantMessage,
    Codec,
    LLMRequest,
    LLMResponse,
    Message,
    MessageDelta,
    ProviderMessages,
    Reasoning,
    ReasoningDelta,
    RunEvent,
    ToolCall,
    ToolCallRouter,
    ToolSpec,
    Usage,
    register_codec,
)

SIGNED = {"type": "thinking", "thinking": "Read it first.", "signature": "sig-1"}


def service_for(tmp_path: Path) -> RunService:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
    echo = ToolSpec("t/echo", "Echo.", {"type": "object"}, lambda inputs: inputs.get("n"))
    return RunService(settings, [echo])


def transcript(tmp_path: Path, run_id: str) -> list[dict[str, Any]]:
    text = (tmp_path / "state" / "runs" / f"{run_id}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


async def test_scripted_reasoning_streams_before_the_text_and_usage_is_reported_as_given(
    tmp_path: Path,
) -> None:
    service = service_for(tmp_path)
    usage = {"inputTokens": 100, "outputTokens": 20, "cacheReadTokens": 80, "reasoningTokens": 7}
    model = {"provider": "scripted", "script": [
        {"reasoning": "Echo seven.", "content": "a", "usage": usage,
         "toolCalls": [{"name": "t/echo", "arguments": {"n": 7}}]},
        {"reasoning": "Done now.", "content": "b", "usage": usage},
    ]}  # fmt: skip
    handle = await service.start(
        RunRequest(prompt="go", model=model, run_id="r1", automation_profile="trusted")
    )
    events = [e async for e in handle.events()]
    result = await handle.result()
    await service.aclose()

    streamed = [(type(e).__name__, e.text) for e in events if isinstance(e, ReasoningDelta | MessageDelta)]  # fmt: skip
    assert streamed == [
        ("ReasoningDelta", "Echo seven."), ("MessageDelta", "a"),
        ("ReasoningDelta", "Done now."), ("MessageDelta", "b"),
    ]  # fmt: skip
    assert result.content == "b"  # reasoning is never part of the answer
    assert result.usage == Usage(200, 40, 160, None, 14)

    lines = transcript(tmp_path, "r1")
    methods = [line["method"] for line in lines]
    assert methods.count("run/reasoningDelta") == 2
    seqs = [line["params"]["seq"] for line in lines if "seq" in line["params"]]
    assert seqs == list(range(1, len(seqs) + 1))  # reasoning is numbered with the rest
    iteration = next(line for line in lines if line["method"] == "run/iteration")
    assert iteration["params"]["usage"] == {
        "inputTokens": 100, "outputTokens": 20, "cacheReadTokens": 80, "reasoningTokens": 7,
    }  # fmt: skip


class SigningModel:
    """A model whose answers carry provider state, as Claude's thinking blocks and
    Gemini's signatures do; it records the history each call was sent."""

    blocking = False

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.seen: list[list[Message]] = []

    def __call__(self, request: LLMRequest) -> LLMResponse:
        self.seen.append(list(request.messages))
        request.on_reasoning("Read it first.")
        if request.iteration == 1:
            call = ToolCall("c1", "t/echo", {"n": 1}, state={"thoughtSignature": "call-sig"})
            return LLMResponse(
                "", [call], reasoning=[Reasoning("Read it first.", dict(SIGNED))],
                state={"textSignature": "t-sig"}, origin=self.origin,
            )  # fmt: skip
        return LLMResponse("done", [], origin=self.origin)


async def test_provider_state_is_kept_out_of_notifications_and_in_the_transcript(
    tmp_path: Path,
) -> None:
    service = service_for(tmp_path)
    model = SigningModel("fake:m1")
    handle = await service.start(
        RunRequest(prompt="go", run_id="r1", automation_profile="trusted", model_caller=model)
    )
    texts: list[str | None] = []

    class Observer:
        def on_event(self, event: RunEvent, text: str | None) -> None:
            if isinstance(event, AssistantMessage):
                texts.append(text)

    handle2 = await service.start(
        RunRequest(prompt="again", run_id="r2", automation_profile="trusted",
                   model_caller=SigningModel("fake:m1")),
        Observer(),
    )  # fmt: skip
    await handle.result()
    await handle2.result()
    await service.aclose()

    assert texts == [None]  # no face is handed notification text for it
    lines = transcript(tmp_path, "r1")
    [kept] = [line["params"] for line in lines if line["method"] == "$/assistant"]
    assert kept == {
        "iteration": 1,
        "origin": "fake:m1",
        "reasoning": [{"text": "Read it first.", "state": SIGNED}],
        "state": {"textSignature": "t-sig"},
        "callStates": {"c1": {"thoughtSignature": "call-sig"}},
    }
    # The second call of the run was sent the state back, unchanged.
    sent = [m for m in model.seen[1] if m.role != "system"][1]  # after the instructions
    assert sent.role == "assistant"
    assert sent.reasoning == [Reasoning("Read it first.", SIGNED)]
    assert sent.tool_calls[0].state == {"thoughtSignature": "call-sig"}
    assert sent.state == {"textSignature": "t-sig"}
    assert sent.origin == "fake:m1"


async def test_a_conversation_continued_after_a_restart_sends_the_state_back(
    tmp_path: Path,
) -> None:
    first = service_for(tmp_path)
    handle = await first.start(
        RunRequest(prompt="go", run_id="r1", automation_profile="trusted",
                   model_caller=SigningModel("fake:m1"))
    )  # fmt: skip
    await handle.result()
    await first.aclose()

    second = service_for(tmp_path)  # a new process: only the transcript remembers
    model = SigningModel("fake:m1")
    handle = await second.start(
        RunRequest(prompt="more", run_id="r2", continue_from="r1",
                   automation_profile="trusted", model_caller=model)
    )  # fmt: skip
    await handle.result()
    await second.aclose()
    assistant = next(m for m in model.seen[0] if m.role == "assistant")
    assert assistant.reasoning == [Reasoning("Read it first.", SIGNED)]
    assert assistant.tool_calls[0].state == {"thoughtSignature": "call-sig"}
    assert assistant.state == {"textSignature": "t-sig"}
    assert assistant.origin == "fake:m1"


class EchoCodec:
    """A wire format that restates each message, to see what the router hands a codec."""

    def name_tokens(self, tokens: list[str]) -> list[str]:
        return tokens

    def tools(self, declarations: Sequence[Any]) -> list[dict[str, Any]]:
        return []

    def messages(self, messages: Sequence[Message], encode: Any) -> ProviderMessages:
        return ProviderMessages(None, [
            {"content": m.content, "reasoning": [(r.text, r.state) for r in m.reasoning],
             "state": m.state, "calls": [c.state for c in m.tool_calls]}
            for m in messages
        ])  # fmt: skip

    def feed(self, draft: Any, chunk: Mapping[str, Any]) -> str:
        return ""

    def events(self, payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return []


_CODEC: Codec = EchoCodec()
register_codec("test-echo-state", _CODEC, replace=True)


def test_another_models_state_is_left_out_and_its_reasoning_read_as_text() -> None:
    own = Message(
        "assistant", "answer", [ToolCall("c1", "t", {}, state={"sig": "a"})],
        reasoning=[Reasoning("thought A", {"enc": "A"})], state={"s": 1}, origin="p:a",
    )  # fmt: skip
    same = ToolCallRouter("test-echo-state", origin="p:a").messages([own]).messages
    assert same == [{"content": "answer", "reasoning": [("thought A", {"enc": "A"})],
                     "state": {"s": 1}, "calls": [{"sig": "a"}]}]  # fmt: skip
    other = ToolCallRouter("test-echo-state", origin="p:b").messages([own]).messages
    assert other == [{"content": "<thinking>\nthought A\n</thinking>\n\nanswer",
                      "reasoning": [], "state": None, "calls": [None]}]  # fmt: skip
    # The conversation itself keeps everything: going back to p:a sends it again.
    assert own.reasoning[0].state == {"enc": "A"}
    assert own.tool_calls[0].state == {"sig": "a"}
    unknown = ToolCallRouter("test-echo-state").messages([own]).messages
    assert unknown == same  # a router that names no model sends what it is given
