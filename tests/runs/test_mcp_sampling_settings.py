"""What a server's ``sampling/createMessage`` asks for is honoured, and what it costs is
counted: its ``maxTokens``, ``temperature``, ``stopSequences`` and ``systemPrompt``
reach the run's model call for that one call; the answer's ``model`` names the model
that answered and its ``stopReason`` why it stopped; its tokens are in the run's usage
(the result, as the transcript keeps it for ``runs show`` and the terminal's summary);
``modelPreferences`` and ``includeContext`` change nothing (the run's model answers,
from the server's messages alone). Through the run service, a real SDK server
(``servers/sampling_server.py``) and the real SDK adapters against loopback fakes of
OpenAI's chat completions and Anthropic's messages API that honour ``max_tokens`` and
stop sequences as the APIs do (the answer cut, with the API's own stop reason)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from cleveragents.mcp import McpServerConfig
from cleveragents.mcp._hooks import MAX_STOP_SEQUENCES
from cleveragents.runs import AskUser, RunRequest, RunService, RunSettings
from cleveragents.tool import PermissionQuery, RunResult, Usage, UsageLimits
from kit.loopback import LoopbackServer, Recorded, Reply, data, event, sse_reply
from kit.paths import MCP_SERVERS
from kit.wait import WAIT_S

SAMPLING = McpServerConfig(
    "samp", command=sys.executable, args=(str(MCP_SERVERS / "sampling_server.py"),),
    startup_timeout_s=WAIT_S,
)  # fmt: skip
ANSWER = "The answer is four, END of story."
TURN_USAGE = Usage(20, 5)
"""What each of the run's own model calls costs (the fakes report it)."""


class FakeModel:
    """A provider on loopback: a request with tools is a turn of the run (the first
    ``rounds`` call the server's ``sample`` tool with ``arguments``, the next ends the
    run); one without is a sampling request, answered with :data:`ANSWER` cut at the
    first stop sequence, or at ``max_tokens`` words, as the API cuts it (one token a
    word)."""

    def __init__(self, arguments: dict[str, Any], rounds: int = 1) -> None:
        self.arguments = arguments
        self.rounds = rounds
        self.sampled: list[dict[str, Any]] = []
        self.sampled_usage = Usage()

    def __call__(self, recorded: Recorded) -> Reply:
        raise NotImplementedError

    def answer(self, cap: int, stops: list[str]) -> tuple[str, str, str | None]:
        """The answer's text, why it stopped (``end``, ``stop`` or ``length``) and the
        stop sequence that stopped it."""
        text, why, matched = ANSWER, "end", None
        for stop in stops:
            at = text.find(stop)
            if at >= 0:
                text, why, matched = text[:at], "stop", stop
        words = text.split(" ")
        if len(words) > cap:
            text, why, matched = " ".join(words[:cap]), "length", None
        return text, why, matched

    def sampling_usage(self, body: dict[str, Any], text: str) -> Usage:
        usage = Usage(len(json.dumps(body["messages"])) // 4, len(text.split()))
        self.sampled_usage += usage
        return usage


class FakeChat(FakeModel):
    """OpenAI's chat completions (``max_tokens`` on a compatible server's URL, ``stop``
    at most four, ``finish_reason`` ``length`` or ``stop``)."""

    def __call__(self, recorded: Recorded) -> Reply:
        body = recorded.body
        tools = body.get("tools")
        if tools:
            answered = sum(m["role"] == "tool" for m in body["messages"])
            if answered >= self.rounds:
                return self.reply({"content": "done"}, "stop", TURN_USAGE)
            (name,) = [t["function"]["name"] for t in tools if "sample" in t["function"]["name"]]
            call = {"index": 0, "id": f"call_{answered}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps(self.arguments)}}  # fmt: skip
            return self.reply({"tool_calls": [call]}, "tool_calls", TURN_USAGE)
        self.sampled.append(body)
        stops = body.get("stop") or []
        assert len(stops) <= 4, "the API refuses more than four stop sequences"
        text, why, _ = self.answer(body.get("max_tokens", 10**6), stops)
        finish = "length" if why == "length" else "stop"
        return self.reply({"content": text}, finish, self.sampling_usage(body, text))

    @staticmethod
    def reply(delta: dict[str, Any], finish: str, usage: Usage) -> Reply:
        def chunk(**fields: Any) -> str:
            return data({"id": "c", "object": "chat.completion.chunk", "created": 1,
                         "model": "gpt-test", **fields})  # fmt: skip

        return sse_reply(
            chunk(choices=[{"index": 0, "delta": {"role": "assistant", **delta},
                            "finish_reason": finish}]),
            chunk(choices=[], usage={"prompt_tokens": usage.input_tokens,
                                     "completion_tokens": usage.output_tokens,
                                     "total_tokens": usage.input_tokens + usage.output_tokens}),
            "data: [DONE]\n\n",
        )  # fmt: skip


class FakeClaude(FakeModel):
    """Anthropic's messages API (``max_tokens`` required, ``stop_sequences``,
    ``stop_reason`` ``max_tokens`` or ``stop_sequence`` naming the sequence)."""

    def __call__(self, recorded: Recorded) -> Reply:
        body = recorded.body
        assert isinstance(body.get("max_tokens"), int), "max_tokens: Field required"
        if body.get("tools"):
            last = body["messages"][-1]["content"]
            if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
                return self.reply(self.text_block("done"), "end_turn", None, TURN_USAGE)
            (name,) = [t["name"] for t in body["tools"] if "sample" in t["name"]]
            return self.reply(self.call_block(name), "tool_use", None, TURN_USAGE)
        self.sampled.append(body)
        text, why, matched = self.answer(body["max_tokens"], body.get("stop_sequences") or [])
        stop = {"end": "end_turn", "stop": "stop_sequence", "length": "max_tokens"}[why]
        usage = self.sampling_usage(body, text)
        return self.reply(self.text_block(text), stop, matched, usage)

    @staticmethod
    def text_block(text: str) -> list[str]:
        return [
            event({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
            event({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": text}}),
            event({"type": "content_block_stop", "index": 0}),
        ]  # fmt: skip

    def call_block(self, name: str) -> list[str]:
        return [
            event({"type": "content_block_start", "index": 0, "content_block":
                   {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}}),
            event({"type": "content_block_delta", "index": 0, "delta":
                   {"type": "input_json_delta", "partial_json": json.dumps(self.arguments)}}),
            event({"type": "content_block_stop", "index": 0}),
        ]  # fmt: skip

    @staticmethod
    def reply(block: list[str], stop: str, matched: str | None, usage: Usage) -> Reply:
        start: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                 "content": [], "stop_reason": None, "stop_sequence": None,
                 "usage": {"input_tokens": usage.input_tokens, "output_tokens": 1}}  # fmt: skip
        return sse_reply(
            event({"type": "message_start", "message": start}),
            *block,
            event({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": matched},
                   "usage": {"output_tokens": usage.output_tokens}}),
            event({"type": "message_stop"}),
        )  # fmt: skip


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789SECRET")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789SECRET")


# One loop and one service (with its one sampling server) for the module: each server
# start costs the SDK's import time. One xdist worker for the module.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("sampling")]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def service(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunService]:
    tmp_path = tmp_path_factory.mktemp("sampling")
    root = tmp_path / "ws"
    root.mkdir()
    settings = RunSettings(
        state_dir=tmp_path / "state", workspace_folders=(str(root),), mcp_servers=(SAMPLING,)
    )
    service = RunService(settings)
    try:
        yield service
    finally:
        await service.aclose()


FAKES: dict[str, tuple[Callable[[dict[str, Any]], FakeModel], dict[str, Any], str]] = {
    "openai": (FakeChat, {"provider": "openai", "model": "gpt-test"}, "/v1"),
    "anthropic": (FakeClaude, {"provider": "anthropic", "model": "claude-test"}, ""),
}


async def sample(
    service: RunService, provider: str, ask: AskUser | None = None, **arguments: Any
) -> tuple[FakeModel, RunResult, Any]:
    """One run on ``provider``'s fake whose model calls ``sample`` with ``arguments``
    (``trusted``; ``supervised`` with ``ask``): the fake, the run's result, and the
    tool's output (JSON read, or an error text)."""
    make, model, path = FAKES[provider]
    fake = make({"text": "What is 2+2?", **arguments})
    with LoopbackServer(respond=fake) as server:
        handle = await service.start(
            RunRequest(
                prompt="Ask the server.", ask=ask,
                automation_profile="trusted" if ask is None else "supervised",
                model={**model, "baseUrl": server.base_url + path, "maxRetries": 0},
            )
        )  # fmt: skip
        result = await handle.result()
    assert result.status == "completed", result.error
    (record,) = result.tool_call_history
    assert record.success, record.error
    output = record.output
    return fake, result, json.loads(output) if output.startswith("{") else output


@pytest.mark.parametrize("provider", sorted(FAKES))
async def test_the_request_s_settings_reach_the_model_call(
    service: RunService, provider: str
) -> None:
    fake, _, output = await sample(
        service, provider, max_tokens=3, temperature=0.2, stop=["END"], system="Be brief."
    )
    (body,) = fake.sampled
    assert body["temperature"] == 0.2
    assert "tools" not in body
    if provider == "openai":
        assert (body["max_tokens"], body["stop"]) == (3, ["END"])
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    else:
        assert (body["max_tokens"], body["stop_sequences"]) == (3, ["END"])
        assert body["system"] == [{"type": "text", "text": "Be brief.",
                                   "cache_control": {"type": "ephemeral"}}]  # fmt: skip
    # Three words, cut there: the server is told it hit its maxTokens.
    assert output["text"] == "The answer is"
    assert output["stopReason"] == "maxTokens"


async def test_the_person_asked_sees_the_settings_the_server_asks_for(
    service: RunService,
) -> None:
    asked: list[PermissionQuery] = []

    async def ask(query: PermissionQuery, reason: str) -> str:
        asked.append(query)
        return "allow_once"

    _, _, output = await sample(service, "openai", ask, max_tokens=9, temperature=0.5, stop=["END"])
    assert output["text"] == "The answer is four, "
    (sampling,) = [query for query in asked if query.spec.name == "mcp:samp/sampling"]
    assert sampling.inputs == {
        "messages": [{"role": "user", "text": "What is 2+2?"}],
        "maxTokens": 9,
        "temperature": 0.5,
        "stopSequences": ["END"],
    }


@pytest.mark.parametrize(
    ("provider", "reason"), [("anthropic", "stopSequence"), ("openai", "endTurn")]
)
async def test_a_stop_sequence_ends_the_answer_and_says_so_where_the_provider_does(
    service: RunService, provider: str, reason: str
) -> None:
    # OpenAI's finish_reason is "stop" for a stop sequence as for a natural end.
    _, _, output = await sample(service, provider, max_tokens=100, stop=["END"])
    assert output["text"] == "The answer is four, "
    assert output["stopReason"] == reason


@pytest.mark.parametrize(
    ("provider", "name"), [("openai", "gpt-test"), ("anthropic", "claude-test")]
)
async def test_the_answer_names_the_model_that_answered_whatever_the_hints(
    service: RunService, provider: str, name: str
) -> None:
    # The user chose the run's model; the server's hints are advisory (MCP's words).
    _, _, output = await sample(service, provider, hint="gemini-2.5-pro")
    assert output["model"] == name
    assert output["text"] == ANSWER
    assert output["stopReason"] == "endTurn"


@pytest.mark.parametrize("provider", sorted(FAKES))
async def test_the_tokens_sampling_spends_are_in_the_run_s_usage(
    service: RunService, provider: str
) -> None:
    fake, result, _ = await sample(service, provider, times=3)
    assert len(fake.sampled) == 3
    turns = TURN_USAGE + TURN_USAGE
    spent = fake.sampled_usage
    assert spent.output_tokens > 0
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        turns.input_tokens + spent.input_tokens,
        turns.output_tokens + spent.output_tokens,
    )
    # As the transcript recorded the run's end: what runs show and the terminal print.
    recorded = service.store.result(result.run_id)
    assert recorded["usage"]["inputTokens"] == result.usage.input_tokens
    assert recorded["usage"]["outputTokens"] == result.usage.output_tokens


async def test_sampling_is_refused_once_the_run_s_usage_reaches_a_token_limit(
    service: RunService,
) -> None:
    # Iteration 1 spends 25 tokens and its call's answer about 18 (under 30 either way);
    # in iteration 2 the two together reach 30, so its call's request is refused, and
    # the run ends at its limit after that iteration.
    fake = FakeChat({"text": "What is 2+2?"}, rounds=2)
    with LoopbackServer(respond=fake) as server:
        handle = await service.start(
            RunRequest(
                prompt="Ask twice.", automation_profile="trusted",
                limits=UsageLimits(max_total_tokens=30),
                model={"provider": "openai", "model": "gpt-test", "maxRetries": 0,
                       "baseUrl": server.base_url + "/v1"},
            )
        )  # fmt: skip
        result = await handle.result()
    assert len(fake.sampled) == 1
    first, second = (record.output for record in result.tool_call_history)
    assert json.loads(first)["text"] == ANSWER
    assert second.startswith("error:")
    assert "sampling refused: the run reached its token limit" in second
    assert (result.status, result.limit_reason) == ("limit", "tokens")


async def test_include_context_adds_nothing_of_the_run_s_conversation(
    service: RunService,
) -> None:
    fake, _, output = await sample(service, "openai", include_context="allServers")
    (body,) = fake.sampled
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "Ask the server." not in json.dumps(body)
    assert output["text"] == ANSWER


async def test_a_scripted_run_answers_as_scripted_never_naming_its_file(
    service: RunService, tmp_path: Path
) -> None:
    script = tmp_path / "secret-place" / "turns.json"
    script.parent.mkdir()
    call = {"name": "mcp:samp/sample", "arguments": {"text": "hi"}}
    script.write_text(json.dumps([{"content": "Hello.", "toolCalls": [call]}, {"content": "ok"}]))
    handle = await service.start(
        RunRequest(prompt="x", model=f"scripted:{script}", automation_profile="trusted")
    )
    result = await handle.result()
    (record,) = result.tool_call_history
    output = json.loads(record.output)
    assert output["model"] == "scripted"
    assert "secret-place" not in record.output


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"max_tokens": 0}, "maxTokens"),
        ({"temperature": 5.0}, "temperature"),
        ({"stop": ["x"] * (MAX_STOP_SEQUENCES + 1)}, "stopSequences"),
        ({"stop": [""]}, "stopSequences[0]"),
    ],
)
async def test_settings_no_provider_takes_are_refused_saying_which(
    service: RunService, arguments: dict[str, Any], words: str
) -> None:
    fake, _, output = await sample(service, "openai", **arguments)
    assert fake.sampled == []
    assert output.startswith("error:")
    assert f"sampling refused: {words}" in output
