"""OpenAIResponsesCaller through the real ``openai`` SDK and the real runtime against
the stateful Responses fake (``kit.fake_openai``, whose docstring quotes the rules it
enforces and where they come from): a tool loop with reasoning on hands every reasoning
item back, unchanged, before the calls that followed it, and the fake refuses it when
they are dropped, with the API's own error. What every provider does (retries,
errors, cancellation, keys) is ``test_provider_contract.py``'s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cleveragents.llm import create_caller, parse_model_spec
from cleveragents.llm.builtin.openai_responses import OpenAIResponsesCaller
from cleveragents.llm.errors import ModelConfigError, ModelProviderError
from cleveragents.llm.spec import ModelSpec, ReasoningSettings
from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.tool import Message, ReasoningDelta, ToolSchema, Usage
from cleveragents.tool import _codec_openai_responses as codec
from kit.fake_openai import ECHO, FakeResponses, run_loop
from kit.loopback import LoopbackServer, make_request

SUMMARY = ReasoningSettings(effort="low", summary=True)
LONG_SYSTEM = "You are careful. " * 400  # ~1,700 tokens: past the 1,024 that caching needs


@pytest.fixture
def fake() -> FakeResponses:
    return FakeResponses()


@pytest.fixture
def server(fake: FakeResponses) -> Iterator[LoopbackServer]:
    with LoopbackServer(respond=fake) as srv:
        yield srv


def spec(server: LoopbackServer, **kw: Any) -> ModelSpec:
    return ModelSpec("openai-responses", model="gpt-test", base_url=server.base_url + "/v1", **kw)


def caller(server: LoopbackServer, **kw: Any) -> OpenAIResponsesCaller:
    made = create_caller(spec(server, **kw))
    assert isinstance(made, OpenAIResponsesCaller)
    return made


def drop_reasoning(monkeypatch: pytest.MonkeyPatch) -> None:
    """The codec as it would be without the pass-back: every item but the reasoning."""
    items = codec._assistant_items

    def without(message: Message, encode: Any) -> list[Any]:
        return [item for item in items(message, encode) if item.get("type") != "reasoning"]

    monkeypatch.setattr(codec, "_assistant_items", without)


# -- the tool loop -------------------------------------------------------------------------


async def test_a_five_iteration_tool_loop_with_reasoning_completes_against_the_enforcing_fake(
    server: LoopbackServer, fake: FakeResponses
) -> None:
    looped = await run_loop(caller(server, reasoning=SUMMARY), system_prompt=LONG_SYSTEM)

    result = looped.result
    assert result.content == "All done."
    assert result.iterations == 6
    assert [r.output for r in result.tool_call_history] == [
        "n=11", "n=21", "n=31", "n=32", "n=41", "n=51",
    ]  # fmt: skip
    assert fake.replies == [200] * 6
    # Each request sent back every reasoning item issued before it, in order, unchanged.
    issued = list(fake.issued)
    assert fake.returned == [issued[:n] for n in range(6)]
    sent = [i for i in fake.requests[-1]["input"] if i.get("type") == "reasoning"]
    assert [i["encrypted_content"] for i in sent] == [fake.issued[i["id"]] for i in sent]
    # The calls went with their ids, right after their reasoning item.
    kinds = [(i.get("type", "message"), i.get("id")) for i in fake.requests[2]["input"]]
    assert kinds == [
        ("message", None), ("message", None),
        ("reasoning", "rs_1"), ("function_call", "fc_1_1"), ("function_call_output", None),
        ("reasoning", "rs_2"), ("message", "msg_2"), ("function_call", "fc_2_1"),
        ("function_call_output", None),
    ]  # fmt: skip


async def test_reasoning_summaries_stream_as_reasoning_before_the_text_of_their_turn(
    server: LoopbackServer, fake: FakeResponses
) -> None:
    looped = await run_loop(caller(server, reasoning=SUMMARY))

    by_turn: dict[tuple[str, int], str] = {}
    for kind, iteration, text in looped.streamed():
        by_turn[kind, iteration] = by_turn.get((kind, iteration), "") + text
    assert by_turn == {
        **{("reasoning", n): fake.turn(n).summary for n in range(1, 7)},
        ("text", 2): "Turn 2, calling. ",
        ("text", 6): "All done.",
    }
    kinds = [kind for kind, iteration, _ in looped.streamed() if iteration in (2, 6)]
    assert kinds == ["reasoning", "reasoning", "text", "text"] * 2
    assert all(isinstance(e.text, str) and e.text for e in looped.events
               if isinstance(e, ReasoningDelta))  # fmt: skip


async def test_usage_comes_from_the_responses_own_fields(
    server: LoopbackServer, fake: FakeResponses
) -> None:
    looped = await run_loop(caller(server, reasoning=SUMMARY), system_prompt=LONG_SYSTEM)

    reported = [
        Usage(
            u["input_tokens"],
            u["output_tokens"],
            cache_read_tokens=u["input_tokens_details"]["cached_tokens"],
            reasoning_tokens=u["output_tokens_details"]["reasoning_tokens"],
        )
        for u in fake.usages
    ]
    assert looped.usage() == reported
    assert reported[0].cache_read_tokens == 0
    assert all(u.cache_read_tokens for u in reported[1:])  # the prefix is read back
    assert all(u.reasoning_tokens for u in reported)
    assert looped.result.usage == sum(reported[1:], reported[0])


async def test_without_the_pass_back_the_same_loop_fails_with_the_providers_400(
    server: LoopbackServer, fake: FakeResponses, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_reasoning(monkeypatch)
    with pytest.raises(ModelProviderError) as info:
        await run_loop(caller(server, reasoning=SUMMARY))
    assert info.value.message == (
        "openai-responses:gpt-test: request rejected (HTTP 400): Item 'fc_1_1' of type "
        "'function_call' was provided without its required 'reasoning' item: 'rs_1'."
    )
    assert fake.replies == [200, 400]  # refused at once, not retried


async def test_reasoning_content_changed_on_the_way_back_is_refused_with_the_providers_400(
    server: LoopbackServer, fake: FakeResponses, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = codec._assistant_items

    def tampered(message: Message, encode: Any) -> list[Any]:
        out = items(message, encode)
        return [{**i, "encrypted_content": "gAAAAforged"} if i.get("type") == "reasoning"
                else i for i in out]  # fmt: skip

    monkeypatch.setattr(codec, "_assistant_items", tampered)
    with pytest.raises(ModelProviderError) as info:
        await run_loop(caller(server, reasoning=SUMMARY))
    assert "request rejected (HTTP 400): The encrypted content for item rs_1 could not be " \
        "verified." in info.value.message  # fmt: skip


async def test_a_conversation_continued_on_another_model_drops_the_state_and_still_runs(
    server: LoopbackServer, fake: FakeResponses
) -> None:
    first = await run_loop(caller(server, reasoning=SUMMARY))
    history = first.result.messages
    assert any(m.reasoning for m in history)

    fake.calls = 7  # two more turns of calls for the other model
    other = create_caller(
        ModelSpec("openai-responses", model="gpt-other", base_url=server.base_url + "/v1",
                  reasoning=SUMMARY)
    )  # fmt: skip
    second = await run_loop(other, "And twice more.", history=history)

    assert second.result.content == "All done."
    sent = fake.requests[6]["input"]
    assert [i for i in sent if i.get("type") == "reasoning"] == []
    assert [i.get("id") for i in sent if i.get("type") == "function_call"] == [None] * 6
    # the first model's reasoning reaches the other one as text
    said = [i["content"] for i in sent if i.get("role") == "assistant"]
    assert said[0] == "<thinking>\nTurn 1: **Planning**\nI should call the tool.\n</thinking>"
    assert fake.replies == [200] * 9


async def test_without_reasoning_no_reasoning_field_is_sent_and_items_go_without_ids(
    server: LoopbackServer, fake: FakeResponses
) -> None:
    looped = await run_loop(caller(server))

    assert looped.result.content == "All done."
    for body in fake.requests:
        assert {"reasoning", "include"}.isdisjoint(body)
        assert body["store"] is False
    # A reasoning item without encrypted content cannot go back (store is false): it is
    # left out, and its calls go without the ids that would ask for it.
    assert fake.returned == [[]] * 6
    last = fake.requests[-1]["input"]
    assert [i.get("id") for i in last if i.get("type") == "function_call"] == [None] * 6
    assert not any(m.carries_state() for m in looped.result.messages)


# -- the request ---------------------------------------------------------------------------


async def test_the_request_body_asks_for_reasoning_and_its_encrypted_content(
    server: LoopbackServer, fake: FakeResponses
) -> None:
    history = [Message("system", "Be brief."), Message("user", "Read a.txt")]
    read = ToolSchema("builtin/file-read", "Read a file.", {"type": "object"})
    call = caller(server, reasoning=SUMMARY, max_tokens=512, temperature=0.5)
    await call(make_request(history, [read]))
    [sent] = server.requests
    assert sent.path == "/v1/responses"
    assert sent.body == {
        "model": "gpt-test",
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Read a.txt"},
        ],
        "stream": True,
        "store": False,
        "tools": [
            {"type": "function", "name": "builtin__file-read", "description": "Read a file.",
             "parameters": {"type": "object"}, "strict": False}
        ],
        "max_output_tokens": 512,
        "temperature": 0.5,
        "reasoning": {"effort": "low", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
    }  # fmt: skip


async def test_a_model_that_does_not_reason_refuses_the_include_with_its_own_message(
    server: LoopbackServer, fake: FakeResponses
) -> None:
    fake.reasons = False
    with pytest.raises(ModelProviderError) as info:
        await run_loop(caller(server, reasoning=ReasoningSettings()))
    assert info.value.message.endswith(
        "request rejected (HTTP 400): Encrypted content is not supported with this model."
    )


async def test_an_effort_the_model_lacks_fails_with_the_providers_message(
    server: LoopbackServer, fake: FakeResponses
) -> None:
    fake.efforts = frozenset({"low", "medium", "high"})
    with pytest.raises(ModelProviderError) as info:
        await run_loop(caller(server, reasoning=ReasoningSettings(effort="minimal")))
    assert "Unsupported value: 'reasoning.effort' does not support 'minimal'" in (
        info.value.message
    )
    assert fake.requests[0]["reasoning"] == {"effort": "minimal"}


def test_a_token_budget_is_refused_as_openai_takes_an_effort(server: LoopbackServer) -> None:
    with pytest.raises(ModelConfigError) as info:
        create_caller(spec(server, reasoning=ReasoningSettings(budget_tokens=2048)))
    assert "take reasoning.effort" in info.value.message
    assert "not budgetTokens" in info.value.message


def test_openai_with_api_responses_is_this_registration() -> None:
    parsed = parse_model_spec(
        {"provider": "openai", "api": "responses", "model": "gpt-5-mini",
         "reasoning": {"effort": "high", "summary": True}}
    )  # fmt: skip
    assert parsed.provider == "openai-responses"
    assert parsed.reasoning == ReasoningSettings(effort="high", summary=True)
    assert parse_model_spec({"provider": "openai-responses", "api": "chat", "model": "m"}).provider == "openai"  # fmt: skip


# -- through the run service -----------------------------------------------------------------


async def test_a_run_continued_after_a_restart_sends_the_reasoning_items_back(
    server: LoopbackServer, fake: FakeResponses, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
    model = {"provider": "openai", "api": "responses", "model": "gpt-test",
             "baseUrl": server.base_url + "/v1", "reasoning": {"effort": "low"}}  # fmt: skip
    fake.calls = 2
    first = RunService(settings, [ECHO])
    handle = await first.start(
        RunRequest(prompt="go", model=model, run_id="r1", automation_profile="trusted")
    )
    assert (await handle.result()).content == "All done."
    await first.aclose()

    fake.calls = 3
    second = RunService(settings, [ECHO])  # a new process: only the transcript remembers
    handle = await second.start(
        RunRequest(prompt="once more", model=model, run_id="r2", continue_from="r1",
                   automation_profile="trusted")
    )  # fmt: skip
    result = await handle.result()
    await second.aclose()

    assert result.content == "All done."
    assert fake.replies == [200] * 5
    assert fake.returned[3] == ["rs_1", "rs_2", "rs_3"]  # the first run's, after the restart
    lines = (tmp_path / "state" / "runs" / "r1.jsonl").read_text(encoding="utf-8").splitlines()
    kept = [json.loads(line)["params"] for line in lines if '"$/assistant"' in line]
    assert [k["reasoning"][0]["state"]["id"] for k in kept] == ["rs_1", "rs_2", "rs_3"]
