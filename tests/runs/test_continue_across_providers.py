"""One conversation continued across providers (issue 20: "a conversation continued on
another provider drops opaque state and still runs"), through the real run service and
the real adapters, each against its enforcing fake (in one service, and with a restart
before each run, so that each conversation is read back from its transcripts): Claude with thinking, then Gemini 3,
then OpenAI's Responses API, then a compatible chat server that streams reasoning, then
Claude again. Each fake refuses state it did not issue (a signature, an encrypted item)
with the provider's own 400, so a run that completes proves the other providers' state
stayed out; each run still sends its own state back within its tool loop; and the first
model, met again, gets its own thinking blocks back, signatures unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.tool import RunResult, ToolSpec
from kit.fake_anthropic import FakeAnthropic
from kit.fake_anthropic import Turn as ClaudeTurn
from kit.fake_gemini import FakeGemini, Step
from kit.fake_openai import FakeResponses, FakeThinkingChat
from kit.loopback import LoopbackServer

CLAUDE_THOUGHT = "I should echo one first."
GEMINI_THOUGHT = "Let me think about what to do next."


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789SECRET")
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFake-0123456789abcdefXYZ")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789SECRET")


class Services:
    """Run services on one state dir whose one tool is ``t/echo`` (so every fake calls
    it): the same one for every run, or (``restart``) a new one for each, as after a
    daemon restart, so each continued conversation is read back from its transcripts."""

    def __init__(self, tmp_path: Path, *, restart: bool) -> None:
        root = tmp_path / "ws"
        root.mkdir()
        self.settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
        self.restart = restart
        self.current: RunService | None = None

    async def get(self) -> RunService:
        if self.current is not None and self.restart:
            await self.aclose()
        if self.current is None:
            echo = ToolSpec("t/echo", "Echo n.", {"type": "object"}, lambda i: i.get("n"))
            self.current = RunService(self.settings, [echo])
        return self.current

    async def aclose(self) -> None:
        if self.current is not None:
            await self.current.aclose()
            self.current = None


@pytest.fixture(params=[False, True], ids=["one-service", "restart-each-run"])
async def service(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Services]:
    services = Services(tmp_path, restart=request.param)
    try:
        yield services
    finally:
        await services.aclose()


async def run(
    services: Services, fake: Any, model: dict[str, Any], run_id: str, parent: str | None
) -> tuple[RunResult, list[dict[str, Any]]]:
    """One run on ``fake``'s loopback server, continuing ``parent``: its result and the
    request bodies the server received."""
    service = await services.get()
    with LoopbackServer(respond=fake) as server:
        base = server.base_url + ("/v1" if model["provider"].startswith("openai") else "")
        handle = await service.start(
            RunRequest(
                prompt=f"Echo more ({run_id}).", model={**model, "baseUrl": base, "maxRetries": 0},
                run_id=run_id, continue_from=parent, automation_profile="trusted",
            )
        )  # fmt: skip
        return await handle.result(), [r.body for r in server.requests]


def outcome(result: RunResult) -> tuple[str, str]:
    return result.status, result.content


async def test_a_conversation_moves_across_four_providers_and_back_dropping_foreign_state(
    service: Services,
) -> None:
    claude = FakeAnthropic(
        [ClaudeTurn(thinking=(CLAUDE_THOUGHT,), calls=(("t__echo", {"n": 1}),))],
        final=ClaudeTurn(thinking=("Done.",), text="Claude echoed."),
    )
    sonnet = {"provider": "anthropic", "model": "claude-sonnet-4-5",
              "reasoning": {"budgetTokens": 2048}}  # fmt: skip
    first, _ = await run(service, claude, sonnet, "r1", None)
    assert outcome(first) == ("completed", "Claude echoed.")

    # Gemini 3: the Claude turns go without their thinking blocks, their thinking as
    # text; its own call's signature goes back within its loop (else its 400).
    gemini = FakeGemini([Step(calls=(("t__echo", {"n": 2}),)), Step(text="Gemini echoed.")])
    second, sent = await run(
        service, gemini,
        {"provider": "gemini", "model": "gemini-3-flash-preview",
         "reasoning": {"effort": "low", "summary": True}},
        "r2", "r1",
    )  # fmt: skip
    assert outcome(second) == ("completed", "Gemini echoed.")
    assert gemini.rejected == []
    [gemini_first, gemini_last] = sent
    assert "signature" not in str(gemini_first["contents"])  # no Claude block, no signature
    model_texts = [
        part["text"]
        for content in gemini_first["contents"]
        if content["role"] == "model"
        for part in content["parts"]
        if "text" in part
    ]
    assert model_texts[0] == f"<thinking>\n{CLAUDE_THOUGHT}\n</thinking>"
    assert "thoughtSignature" in str(gemini_last)  # its own, back on its call

    # The Responses API: no Gemini signature, no Claude block; calls without item ids;
    # its own reasoning item back before its own call.
    responses = FakeResponses(calls=2, parallel_at=frozenset(), text_at=frozenset())
    third, _ = await run(
        service, responses,
        {"provider": "openai", "api": "responses", "model": "gpt-5-mini",
         "reasoning": {"effort": "low", "summary": True}},
        "r3", "r2",
    )  # fmt: skip
    assert outcome(third) == ("completed", "All done.")
    assert responses.replies == [200, 200]
    opening = responses.requests[0]["input"]
    assert [i for i in opening if i.get("type") == "reasoning"] == []
    assert [i.get("id") for i in opening if i.get("type") == "function_call"] == [None] * 2
    said = [i["content"] for i in opening if i.get("role") == "assistant"]
    assert f"<thinking>\n{GEMINI_THOUGHT}\n</thinking>" in said
    assert responses.returned == [[], ["rs_1"]]

    # A compatible chat server that streams `reasoning`: only its own goes back in it.
    chat = FakeThinkingChat(calls=3, parallel_at=frozenset(), field="reasoning", enforce=False)
    fourth, _ = await run(
        service, chat,
        {"provider": "openai", "model": "qwen3-test", "reasoning": {"effort": "low"}},
        "r4", "r3",
    )  # fmt: skip
    assert outcome(fourth) == ("completed", "All done.")
    assert chat.returned[0] == [None] * 6  # three runs' assistant turns, none its own
    assert chat.returned[1][-1] == chat.thought(3)

    # Claude again: its own blocks of r1 go back unchanged (the fake checks each
    # signature), the other providers' turns as text.
    claude.turns = []
    fifth, sent = await run(service, claude, sonnet, "r5", "r4")
    assert outcome(fifth) == ("completed", "Claude echoed.")
    assert claude.refusals == []
    history = sent[-1]["messages"]
    blocks = [b for m in history if m["role"] == "assistant" for b in m["content"]]
    thinking = [b for b in blocks if b["type"] == "thinking"]
    assert [b["thinking"] for b in thinking] == [CLAUDE_THOUGHT, "Done."]
    assert all(b["signature"] for b in thinking)


async def test_a_scripted_conversation_continued_on_claude_gives_it_the_reasoning_as_text(
    service: Services,
) -> None:
    """The scripted model stamps its answers with its spec (``scripted:<inline>``), so
    its reasoning, which has no state, reaches another model as text, not nowhere."""
    scripted = {"provider": "scripted", "script": [
        {"reasoning": "Echo seven.", "content": "Echoing.",
         "toolCalls": [{"name": "t/echo", "arguments": {"n": 7}}]},
        {"content": "Seven."},
    ]}  # fmt: skip
    handle = await (await service.get()).start(
        RunRequest(prompt="Echo seven.", model=scripted, run_id="s1", automation_profile="trusted")
    )
    assert (await handle.result()).status == "completed"

    claude = FakeAnthropic([], final=ClaudeTurn(thinking=("Fine.",), text="Claude here."))
    sonnet = {"provider": "anthropic", "model": "claude-sonnet-4-5",
              "reasoning": {"budgetTokens": 2048}}  # fmt: skip
    result, [sent] = await run(service, claude, sonnet, "s2", "s1")
    assert outcome(result) == ("completed", "Claude here.")
    assert claude.refusals == []
    said = sent["messages"][1]
    assert said["role"] == "assistant"
    assert said["content"][0]["text"] == "<thinking>\nEcho seven.\n</thinking>\n\nEchoing."
