"""Claude's thinking and prompt caching end to end: the real adapter, through the real
``anthropic`` SDK, in the real run service, against ``kit.fake_anthropic.FakeAnthropic``,
which enforces the messages API's rules as Anthropic documents them (each rule, its
source and the API's words are in that module's docstring): thinking blocks signed and
checked, the assistant turn before a tool result starting with them, prompt prefixes
cached at the breakpoints it is given and reported as the API reports them."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cleveragents.llm.builtin import anthropic as adapter
from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.tool import (
    IterationFinished,
    MessageDelta,
    ReasoningDelta,
    RunEvent,
    RunResult,
    ToolSpec,
)
from cleveragents.tool import _codec_anthropic as codec
from kit.fake_anthropic import (
    CANNOT_BE_MODIFIED,
    INTERLEAVED_BETA,
    INVALID_SIGNATURE,
    MUST_START_WITH_THINKING,
    FakeAnthropic,
    Turn,
    tokens,
)
from kit.loopback import LoopbackServer

KEY = "sk-ant-test-0123456789SECRET"
SYSTEM = "You are a careful assistant who checks each step before the next. " * 80
"""About 1,300 tokens by the fake's count: past the 1,024 a prefix needs to be cached."""

LOOP = [
    Turn(thinking=("I should echo one first.",), calls=(("t__echo", {"n": 1}),)),
    Turn(
        thinking=("Now two, and check it.", "The second thought."),
        redacted=True,
        calls=(("t__echo", {"n": 2}),),
    ),
    Turn(
        thinking=("Three and four can go together.",),
        text="Both at once.",
        calls=(("t__echo", {"n": 3}), ("t__echo", {"n": 4})),
    ),
    Turn(thinking=("Five, then done.",), calls=(("t__echo", {"n": 5}),)),
]
ANSWER = Turn(thinking=("All five echoed.",), text="Echoed one to five.")
"""With LOOP: five iterations, four of them calling tools (two in parallel once, a
redacted block once), the fifth answering."""


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


@pytest.fixture
def fake() -> FakeAnthropic:
    return FakeAnthropic(LOOP, final=ANSWER)


@pytest.fixture
def claude(fake: FakeAnthropic) -> Iterator[LoopbackServer]:
    with LoopbackServer(respond=fake) as server:
        yield server


def spec(server: LoopbackServer, model: str = "claude-sonnet-4-5", **fields: Any) -> dict[str, Any]:
    return {"provider": "anthropic", "model": model, "baseUrl": server.base_url, **fields}


async def run(
    tmp_path: Path, model: dict[str, Any], *, run_id: str = "r1", continue_from: str | None = None
) -> tuple[RunResult, list[RunEvent]]:
    """One run of the service over the echo tool; its result and events."""
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
    echo = ToolSpec("t/echo", "Echo n.", {"type": "object"}, lambda inputs: inputs.get("n"))
    service = RunService(settings, [echo])
    try:
        handle = await service.start(
            RunRequest(
                prompt="Echo one to five.", system_prompt=SYSTEM, model=model, run_id=run_id,
                automation_profile="trusted", continue_from=continue_from,
            )
        )  # fmt: skip
        events = [e async for e in handle.events()]
        return await handle.result(), events
    finally:
        await service.aclose()


def types_of(message: dict[str, Any]) -> list[str]:
    return [block["type"] for block in message["content"]]


async def test_a_five_iteration_tool_loop_with_thinking_completes_and_sends_it_back(
    tmp_path: Path, claude: LoopbackServer, fake: FakeAnthropic
) -> None:
    result, _ = await run(tmp_path, spec(claude, reasoning={"budgetTokens": 2048}))

    assert fake.refusals == []
    assert (result.status, result.content, result.iterations) == (
        "completed", "Echoed one to five.", 5,
    )  # fmt: skip
    assert [r.output for r in result.tool_call_history] == [1, 2, 3, 4, 5]
    sent = [r.body for r in claude.requests]
    assert len(sent) == 5
    for body, request in zip(sent, claude.requests, strict=True):
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert body["max_tokens"] == 2048 + 4096
        assert request.headers["anthropic-beta"] == INTERLEAVED_BETA
    # Each assistant turn went back with its thinking first, as it came (the fake checked
    # the signatures and the order): thinking, then text, then the tool calls.
    assert [types_of(m) for m in sent[4]["messages"] if m["role"] == "assistant"] == [
        ["thinking", "tool_use"],
        ["thinking", "thinking", "redacted_thinking", "tool_use"],
        ["thinking", "text", "tool_use", "tool_use"],
        ["thinking", "tool_use"],
    ]


async def test_reasoning_streams_before_the_text_of_each_iteration(
    tmp_path: Path, claude: LoopbackServer
) -> None:
    _, events = await run(tmp_path, spec(claude, reasoning={"budgetTokens": 2048}))
    streamed = [e for e in events if isinstance(e, ReasoningDelta | MessageDelta)]
    by_iteration: dict[int, list[RunEvent]] = {}
    for e in streamed:
        by_iteration.setdefault(e.iteration, []).append(e)
    thoughts = {i: "".join(e.text for e in es if isinstance(e, ReasoningDelta))
                for i, es in by_iteration.items()}  # fmt: skip
    assert thoughts == {
        1: "I should echo one first.",
        2: "Now two, and check it.The second thought.",  # the redacted block has no text
        3: "Three and four can go together.",
        4: "Five, then done.",
        5: "All five echoed.",
    }
    for es in by_iteration.values():
        kinds = [type(e) for e in es]
        assert kinds == sorted(kinds, key=lambda k: k is MessageDelta)  # reasoning first
        assert all(e.text for e in es)
    assert [e.text for e in by_iteration[3] if isinstance(e, MessageDelta)] == ["Both a", "t once."]


async def test_usage_reports_the_providers_cache_reads_writes_and_thinking_tokens(
    tmp_path: Path, claude: LoopbackServer, fake: FakeAnthropic
) -> None:
    result, events = await run(tmp_path, spec(claude, reasoning={"budgetTokens": 2048}))
    reported = [e.usage for e in events if isinstance(e, IterationFinished)]
    served = [s.usage for s in fake.served]
    assert [(u.cache_read_tokens, u.cache_write_tokens) for u in reported if u] == [
        (s["cache_read_input_tokens"], s["cache_creation_input_tokens"]) for s in served
    ]
    assert [u.input_tokens for u in reported if u] == [sum(s.values()) for s in served]
    # From the second iteration on, each reads at least the whole previous request.
    for before, now in itertools.pairwise(served):
        assert now["cache_read_input_tokens"] >= sum(before.values())
    assert [s.breakpoints for s in fake.served] == [3, 4, 4, 4, 4]
    assert result.usage is not None
    assert result.usage.cache_read_tokens == sum(s["cache_read_input_tokens"] for s in served)
    thinking = [*(t for turn in LOOP for t in turn.thinking), *ANSWER.thinking]
    assert result.usage.reasoning_tokens is not None
    assert result.usage.reasoning_tokens >= sum(tokens(t) for t in thinking)


async def test_cache_false_places_no_breakpoint_and_nothing_is_read_from_the_cache(
    tmp_path: Path, claude: LoopbackServer, fake: FakeAnthropic
) -> None:
    result, _ = await run(tmp_path, spec(claude, reasoning={"budgetTokens": 2048}, cache=False))
    assert result.status == "completed"
    assert [s.breakpoints for s in fake.served] == [0] * 5
    assert result.usage is not None
    assert (result.usage.cache_read_tokens, result.usage.cache_write_tokens) == (0, 0)
    assert "cache_control" not in str([r.body for r in claude.requests])


def _no_thinking_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "THINKING_BLOCKS", frozenset())


def _no_redacted_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "THINKING_BLOCKS", frozenset({"thinking"}))


def _edited_thinking(monkeypatch: pytest.MonkeyPatch) -> None:
    real = codec.plain

    def plain(value: Any) -> Any:
        copy = real(value)
        if isinstance(copy, dict) and copy.get("type") == "thinking":
            copy["thinking"] = copy["thinking"].upper()
        return copy

    monkeypatch.setattr(codec, "plain", plain)


@pytest.mark.parametrize(
    ("break_it", "refusal"),
    [
        (_no_thinking_blocks, MUST_START_WITH_THINKING.format(i=1, found="tool_use")),
        (_edited_thinking, INVALID_SIGNATURE.format(i=1, j=0)),
        (_no_redacted_blocks, CANNOT_BE_MODIFIED.format(i=3, j=2)),
    ],
    ids=["thinking-left-out", "thinking-edited", "redacted-left-out"],
)
async def test_without_the_pass_back_the_same_loop_fails_with_the_providers_400(
    tmp_path: Path,
    claude: LoopbackServer,
    fake: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    break_it: Any,
    refusal: str,
) -> None:
    break_it(monkeypatch)
    result, _ = await run(tmp_path, spec(claude, reasoning={"budgetTokens": 2048}))
    assert fake.refusals == [refusal]
    assert result.status == "failed"
    assert result.error is not None
    # The provider's own words, as far as the error's one line holds them.
    assert "anthropic:claude-sonnet-4-5: request rejected (HTTP 400): " in result.error.message
    assert refusal[:150] in result.error.message


async def test_adaptive_thinking_with_its_text_omitted_is_still_sent_back_whole(
    tmp_path: Path, claude: LoopbackServer, fake: FakeAnthropic
) -> None:
    """Claude Opus 4.7 thinks adaptively and, by default, sends its thinking blocks with
    no text: nothing to show, but the signed blocks must still go back."""
    result, events = await run(
        tmp_path, spec(claude, "claude-opus-4-7", reasoning={"effort": "high"})
    )
    assert fake.refusals == []
    assert result.status == "completed"
    assert not [e for e in events if isinstance(e, ReasoningDelta)]
    last = claude.requests[-1]
    assert last.body["thinking"] == {"type": "adaptive"}
    assert last.body["output_config"] == {"effort": "high"}
    assert "anthropic-beta" not in last.headers
    assistant = [m for m in last.body["messages"] if m["role"] == "assistant"]
    assert types_of(assistant[0]) == ["thinking", "tool_use"]
    assert assistant[0]["content"][0]["thinking"] == ""


async def test_summary_asks_for_readable_thinking(tmp_path: Path, claude: LoopbackServer) -> None:
    _, events = await run(
        tmp_path, spec(claude, "claude-opus-4-7", reasoning={"effort": "low", "summary": True})
    )
    assert claude.requests[0].body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert claude.requests[0].body["output_config"] == {"effort": "low"}
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)).startswith(
        "I should echo one first."
    )


async def test_a_conversation_continued_on_another_model_drops_the_thinking_and_runs(
    tmp_path: Path, claude: LoopbackServer, fake: FakeAnthropic
) -> None:
    """The fake binds a signature to the model that made it, as the API does: sent to
    another model, the first model's blocks would be refused. They are left out, and
    their text goes as text."""
    first, _ = await run(tmp_path, spec(claude, reasoning={"budgetTokens": 2048}))
    assert first.status == "completed"
    fake.turns = []  # the next run answers at once
    second, _ = await run(
        tmp_path, spec(claude, "claude-haiku-4-5", reasoning={"budgetTokens": 2048}),
        run_id="r2", continue_from="r1",
    )  # fmt: skip
    assert fake.refusals == []
    assert second.status == "completed"
    history = claude.requests[-1].body["messages"]
    assert "thinking" not in [t for m in history for t in types_of(m)]
    assert history[1]["content"][0]["text"].startswith("<thinking>\nI should echo one first.")


WIDE = [
    Turn(thinking=("One first.",), calls=(("t__echo", {"n": 0}),)),
    Turn(thinking=("Now twelve at once.",), calls=tuple(("t__echo", {"n": n}) for n in range(12))),
]


@pytest.mark.parametrize("previous_turn_marked", [True, False], ids=["default", "last-only"])
async def test_an_iteration_of_many_blocks_still_reads_the_previous_prefix(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    previous_turn_marked: bool,
) -> None:
    """Twelve parallel calls add 26 blocks, past the 20 the API looks back from a
    breakpoint: the breakpoint on the message two before the last (where the previous
    request put its own) is what still finds the previous prefix in the cache."""
    if not previous_turn_marked:
        real = adapter.mark_breakpoints

        def last_only(system: Any, tools: Any, messages: list[dict[str, Any]]) -> Any:
            return real(system, tools, messages[-1:])

        monkeypatch.setattr(adapter, "mark_breakpoints", last_only)
    fake = FakeAnthropic(WIDE, final=ANSWER)
    with LoopbackServer(respond=fake) as server:
        result, _ = await run(tmp_path, spec(server, reasoning={"budgetTokens": 2048}))
    assert result.status == "completed"
    before, wide = fake.served[1].usage, fake.served[2].usage
    tools_and_system = fake.served[0].usage["cache_creation_input_tokens"]
    if previous_turn_marked:
        assert wide["cache_read_input_tokens"] == sum(before.values())
    else:  # only the tools and the system prompt are found again
        assert 0 < wide["cache_read_input_tokens"] < sum(before.values())
        assert wide["cache_read_input_tokens"] <= tools_and_system
