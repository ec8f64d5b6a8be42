"""The context budget inside the loop, against a model that enforces its window: prune and
summary each alone, the provider's own refusal answered by a harder compaction, a
history processor of the user's, pairing and provider state kept, and the limits a
user sets (tool calls, deadline, tokens, iterations)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest

from cleveragents.tool import (
    CancelToken,
    Compacted,
    ContextPolicy,
    ContextUsage,
    ContextWindowExceededError,
    EventSink,
    HistoryRewritten,
    LLMRequest,
    LLMResponse,
    Message,
    Reasoning,
    RunEvent,
    ToolCall,
    ToolCallingRuntime,
    ToolCallRouter,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
    Usage,
    UsageLimits,
)


def window_size(messages: Sequence[Message]) -> int:
    """The fake's own count: a token per four bytes of the request's JSON."""
    body = [
        {
            "role": m.role,
            "content": m.content,
            "calls": [[c.name, c.arguments] for c in m.tool_calls],
        }
        for m in messages
    ]
    return len(json.dumps(body).encode()) // 4


class WindowedModel:
    """Calls ``t/read`` every iteration until ``turns``, then answers; refuses (as a
    provider does) any request past ``window`` tokens by its own count, and reports
    that count as its input usage. Summary requests get a short summary."""

    blocking = False

    def __init__(self, window: int, turns: int, *, known_window: int | None = None) -> None:
        self.window = window
        self.context_window = known_window if known_window is not None else window
        self.turns = turns
        self.sizes: list[int] = []
        self.summaries = 0
        self.seen: list[list[Message]] = []

    def __call__(self, request: LLMRequest) -> LLMResponse:
        size = window_size(request.messages)
        if size > self.window:
            raise ContextWindowExceededError(f"{size} tokens > {self.window} maximum")
        if request.purpose == "summary":
            self.summaries += 1
            return LLMResponse("Read the file many times; it holds x's.", usage=Usage(size, 10))
        self.sizes.append(size)
        self.seen.append(list(request.messages))
        usage = Usage(size, 5)
        if request.iteration >= self.turns:
            return LLMResponse("done", usage=usage)
        call = ToolCall(f"c{request.iteration}", "t/read", {"n": request.iteration})
        return LLMResponse(
            f"reading {request.iteration}", [call], usage=usage,
            reasoning=[Reasoning("think", {"sig": f"s{request.iteration}"})], origin="fake:m",
        )  # fmt: skip


class Events(EventSink):
    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def on_event(self, event: RunEvent, /) -> None:
        self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def runtime_with(model: Any, output: str, **kw: Any) -> tuple[ToolCallingRuntime, Events]:
    registry = ToolRegistry()
    registry.register(ToolSpec("t/read", "Read.", {"type": "object"}, lambda inputs: output))
    sink = Events()
    runtime = ToolCallingRuntime(
        registry, ToolRunner(registry), model, max_iterations=kw.pop("max_iterations", 500),
        sink=sink, **kw,
    )  # fmt: skip
    return runtime, sink


def assert_paired(messages: Sequence[Message]) -> None:
    """Every tool result answers a call of the assistant message before its run of
    results, and every call is answered."""
    pending: set[str] = set()
    for message in messages:
        if message.role == "assistant":
            assert not pending, f"calls {pending} were never answered"
            pending = {c.id for c in message.tool_calls}
        elif message.role == "tool":
            assert message.tool_call_id in pending
            pending.discard(message.tool_call_id)
        else:
            assert not pending


def test_pruning_alone_keeps_a_long_run_inside_its_window() -> None:
    model = WindowedModel(window=12_000, turns=60)
    runtime, sink = runtime_with(model, "x" * 8_000)
    result = runtime.run_tool_loop("read it, again and again", system_prompt="Be thorough.")
    assert result.content == "done"
    assert result.iterations == 60
    assert max(model.sizes) <= model.window
    compactions = sink.of(Compacted)
    assert compactions
    assert {c.strategy for c in compactions} == {"prune"}
    assert all(c.tokens_after < c.tokens_before for c in compactions)
    last = model.seen[-1]
    tools = [m for m in last if m.role == "tool"]
    stubs = ["was cut from the conversation" in m.content for m in tools]
    assert stubs[: stubs.index(False)] == [True] * stubs.index(False)  # oldest first
    assert stubs.index(False) >= len(tools) - 6
    assert tools[-2].content == tools[-1].content == "x" * 8_000  # the latest are whole
    assert last[0].content == "Be thorough."
    assert last[1].content == "read it, again and again"
    assert_paired(last)
    pruned = [e for e in sink.of(HistoryRewritten) if e.pruned]
    assert sum(len(e.pruned) for e in pruned) == sum(stubs)  # each pruned once
    assert len(result.tool_call_history) == 59  # records keep every output whole
    assert all(r.output == "x" * 8_000 for r in result.tool_call_history)


def test_a_summary_replaces_old_iterations_when_pruning_cannot_help() -> None:
    model = WindowedModel(window=3_000, turns=80)
    runtime, sink = runtime_with(model, "ok")  # outputs too small to prune
    result = runtime.run_tool_loop("count to eighty", system_prompt="Sys.")
    assert result.content == "done"
    assert max(model.sizes) <= model.window
    summaries = [c for c in sink.of(Compacted) if c.strategy == "summary"]
    assert summaries
    assert all(c.messages_removed > 0 for c in summaries)
    assert model.summaries == len(summaries)
    last = model.seen[-1]
    assert [m.content for m in last[:2]] == ["Sys.", "count to eighty"]
    assert last[2].content.startswith("[Earlier messages of this conversation were compacted")
    assert "Read the file many times" in last[2].content
    assert_paired(last)
    # The kept iterations keep their provider state for the model that made them.
    kept = [m for m in last if m.role == "assistant"]
    assert kept
    assert all(m.reasoning[0].state is not None for m in kept)
    assert result.usage is not None
    assert result.usage.output_tokens == 5 * 80 + 10 * len(summaries)  # summaries are paid for


def test_a_window_the_provider_enforces_below_the_budget_is_met_by_compacting_harder() -> None:
    # The budget believes in a large window; the provider refuses at 6,000 tokens.
    model = WindowedModel(window=6_000, turns=30, known_window=1_000_000)
    runtime, sink = runtime_with(model, "y" * 3_000)
    result = runtime.run_tool_loop("go")
    assert result.content == "done"
    assert max(model.sizes) <= model.window
    assert sink.of(Compacted)


def test_without_compaction_the_same_run_fails_on_the_providers_refusal() -> None:
    model = WindowedModel(window=6_000, turns=30)
    runtime, _ = runtime_with(model, "y" * 3_000, context=ContextPolicy(enabled=False))
    with pytest.raises(ContextWindowExceededError, match="maximum"):
        runtime.run_tool_loop("go")


def test_a_history_processor_of_the_users_runs_before_every_model_call() -> None:
    seen: list[ContextUsage] = []

    def keep_last_four(messages: list[Message], usage: ContextUsage) -> list[Message]:
        seen.append(usage)
        if len(messages) <= 6:
            return messages
        # Keep the prompt, then whole iterations (assistant + tool) from the end.
        return [messages[0], *messages[-4:]]

    model = WindowedModel(window=100_000, turns=6)
    runtime, _ = runtime_with(model, "z", context=ContextPolicy(processor=keep_last_four))
    result = runtime.run_tool_loop("go")
    assert result.content == "done"
    assert [u.iteration for u in seen] == [1, 2, 3, 4, 5, 6]
    assert all(u.window == 100_000 for u in seen)
    assert max(len(m) for m in model.seen) <= 6
    assert_paired(model.seen[-1])


@pytest.mark.parametrize("codec", ["openai", "anthropic", "gemini"])
def test_a_compacted_conversation_is_valid_for_every_codec(codec: str) -> None:
    model = WindowedModel(window=3_000, turns=60)
    runtime, _ = runtime_with(model, "ok")
    runtime.run_tool_loop("go", system_prompt="Sys.")
    router = ToolCallRouter(codec, origin="fake:m")
    sent = router.messages(model.seen[-1]).messages
    if codec == "openai":
        names = set()
        for item in sent:
            names |= {c["id"] for c in item.get("tool_calls") or ()}
            if item["role"] == "tool":
                assert item["tool_call_id"] in names
    elif codec == "anthropic":
        roles = [m["role"] for m in sent]
        assert all(a != b for a, b in itertools.pairwise(roles))  # alternating
        for before, after in itertools.pairwise(sent):
            results = [b for b in after["content"] if b["type"] == "tool_result"]
            uses = {b["id"] for b in before["content"] if b["type"] == "tool_use"}
            assert {r["tool_use_id"] for r in results} <= uses
    else:
        for before, after in itertools.pairwise(sent):
            answers = [p for p in after["parts"] if "functionResponse" in p]
            asked = [p for p in before["parts"] if "functionCall" in p]
            if answers:
                assert len(answers) == len(asked)


# -- limits -------------------------------------------------------------------------------


class CallingModel:
    """Asks for ``per_turn`` calls of ``t/read`` each iteration, reporting usage."""

    blocking = False

    def __init__(self, per_turn: int) -> None:
        self.per_turn = per_turn

    def __call__(self, request: LLMRequest) -> LLMResponse:
        calls = [ToolCall(f"c{request.iteration}_{i}", "t/read", {}) for i in range(self.per_turn)]
        return LLMResponse(f"turn {request.iteration}", calls, usage=Usage(100, 10))


def test_the_tool_call_limit_runs_the_calls_that_fit_and_records_the_rest_as_not_run() -> None:
    runtime, _ = runtime_with(CallingModel(3), "r", limits=UsageLimits(max_tool_calls=5))
    result = runtime.run_tool_loop("go")
    assert result.terminated_by_limit
    assert result.limit_reason == "toolCalls"
    assert [r.success for r in result.tool_call_history] == [True] * 5 + [False]
    assert (
        result.tool_call_history[-1].error == "not run: the run reached its limit of 5 tool calls"
    )
    assert result.iterations == 2
    assert_paired(result.messages)


def test_the_token_limit_ends_the_run_once_reached() -> None:
    runtime, _ = runtime_with(CallingModel(1), "r", limits=UsageLimits(max_total_tokens=330))
    result = runtime.run_tool_loop("go")
    assert (result.terminated_by_limit, result.limit_reason) == (True, "tokens")
    assert result.iterations == 3  # 110 tokens an iteration


def test_the_iteration_limit_says_so() -> None:
    runtime, _ = runtime_with(CallingModel(1), "r", max_iterations=2)
    result = runtime.run_tool_loop("go")
    assert (result.terminated_by_limit, result.limit_reason, result.iterations) == (
        True, "iterations", 2,
    )  # fmt: skip


async def test_the_deadline_cancels_the_call_in_flight_and_ends_at_the_limit() -> None:
    started = asyncio.Event()

    async def slow(inputs: dict[str, Any]) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    registry = ToolRegistry()
    registry.register(ToolSpec("t/read", "Read.", {"type": "object"}, slow))
    runtime = ToolCallingRuntime(
        registry, ToolRunner(registry), CallingModel(1), limits=UsageLimits(deadline_s=0.3)
    )
    cancel = CancelToken()
    result = await asyncio.wait_for(runtime.arun_tool_loop("go", cancel=cancel), 10)
    assert started.is_set()
    assert (result.terminated_by_limit, result.cancelled, result.limit_reason) == (
        True, False, "deadline",
    )  # fmt: skip
    assert result.content == "turn 1"  # what the model said so far
    assert not result.tool_call_history[0].success
    assert not cancel.cancelled  # the caller's token is the caller's


def test_limits_refuse_nonsense_values() -> None:
    with pytest.raises(ValueError, match="max_tool_calls"):
        UsageLimits(max_tool_calls=0)
    with pytest.raises(ValueError, match="deadline_s"):
        UsageLimits(deadline_s=-1)
    with pytest.raises(ValueError, match="compact_at"):
        ContextPolicy(compact_at=1.5)
    with pytest.raises(TypeError, match="ContextPolicy"):
        ToolCallingRuntime(ToolRegistry(), ToolRunner(ToolRegistry()), CallingModel(1),
                           context="off")  # type: ignore[arg-type]  # fmt: skip
