"""Gemini's reasoning end to end, against a fake that enforces the API's rules as Google
documents them (``kit.fake_gemini``, where each rule is quoted with its source): thought
signatures kept and sent back through a long tool loop (through the adapter alone, and
through the run service), the API's own 400 when they are not, thought summaries
streamed as reasoning before the answer, ``thinking_config`` from the spec's
``reasoning``, usage from Gemini's own fields, and no change at all to a request without
``reasoning``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from cleveragents.llm.builtin.gemini import GeminiCaller
from cleveragents.llm.errors import ModelProviderError
from cleveragents.llm.spec import ReasoningSettings
from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.tool import (
    CancelToken,
    IterationFinished,
    LLMRequest,
    LLMResponse,
    Message,
    MessageDelta,
    ReasoningDelta,
    ToolActorContext,
    ToolSchema,
    ToolSpec,
    Usage,
)
from cleveragents.tool._codec_gemini import GeminiCodec
from kit.fake_gemini import (
    CORRUPTED_SIGNATURE,
    MISSING_SIGNATURE,
    UNSUPPORTED_LEVEL,
    FakeGemini,
    Step,
)
from kit.loopback import LoopbackServer

from .kits import GEMINI

KEY = "AIzaFake-0123456789abcdefXYZ"
ECHO = ToolSchema("t/echo", "Echo.", {"type": "object"})
SUMMARY = ReasoningSettings(effort="low", summary=True)
THOUGHT = "Let me think about what to do next."


def loop_steps() -> list[Step]:
    """Five iterations that call tools (the third two at once), then the answer."""
    return [
        Step(calls=(("t__echo", {"n": 1}),)),
        Step(calls=(("t__echo", {"n": 2}),)),
        Step(calls=(("t__echo", {"n": 3}), ("t__echo", {"n": 4}))),
        Step(calls=(("t__echo", {"n": 5}),), text="Nearly there."),
        Step(calls=(("t__echo", {"n": 6}),)),
        Step(text="All six echoed."),
    ]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)


def forget_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The codec as it was: parts rebuilt from text, names and arguments alone."""
    real = GeminiCodec.messages

    def forgetful(self: GeminiCodec, messages: Any, encode: Any) -> Any:
        bare = [
            attrs.evolve(
                m,
                tool_calls=[attrs.evolve(c, state=None) for c in m.tool_calls],
                reasoning=[],
                state=None,
            )
            for m in messages
        ]
        return real(self, bare, encode)

    monkeypatch.setattr(GeminiCodec, "messages", forgetful)


def request(messages: list[Message], iteration: int, said: list[tuple[str, str]]) -> LLMRequest:
    return LLMRequest(
        messages=messages,
        tools=[ECHO],
        iteration=iteration,
        context=ToolActorContext(),
        cancel=CancelToken(),
        on_delta=lambda text: said.append(("text", text)),
        on_reasoning=lambda text: said.append(("reasoning", text)),
    )


def assistant(response: LLMResponse) -> Message:
    return Message(
        "assistant",
        response.content,
        response.tool_calls,
        reasoning=response.reasoning,
        state=response.state,
        origin=response.origin,
    )


def signatures_sent(body: dict[str, Any]) -> list[bytes]:
    return [
        base64.urlsafe_b64decode(part["thoughtSignature"])
        for content in body["contents"]
        for part in content["parts"]
        if "thoughtSignature" in part
    ]


async def run_loop(caller: GeminiCaller) -> tuple[list[LLMResponse], list[tuple[str, str]]]:
    """The tool loop as the runtime drives it, by hand, so each step can be seen."""
    messages = [Message("user", "Echo one to six.")]
    responses: list[LLMResponse] = []
    said: list[tuple[str, str]] = []
    for iteration in range(1, 7):
        response = await caller(request(messages, iteration, said))
        responses.append(response)
        messages.append(assistant(response))
        for call in response.tool_calls:
            messages.append(Message("tool", str(call.arguments["n"]), [], call.id, call.name))
        if not response.tool_calls:
            break
    return responses, said


# -- the adapter alone ---------------------------------------------------------------------


async def test_a_five_iteration_tool_loop_with_reasoning_completes_against_the_fake() -> None:
    fake = FakeGemini(loop_steps())
    with LoopbackServer(respond=fake) as server:
        caller = GEMINI.caller(server, reasoning=SUMMARY)
        assert isinstance(caller, GeminiCaller)
        responses, said = await run_loop(caller)
        await caller.aclose()
        sent = [r.body for r in server.requests]

    assert fake.rejected == []
    assert [r.content for r in responses][-1] == "All six echoed."
    assert [len(r.tool_calls) for r in responses] == [1, 1, 2, 1, 1, 0]
    # Every request carried back every signature issued before it, unchanged (as bytes:
    # the SDK writes them URL-safe), each on the part it came with.
    issued = [base64.b64decode(s) for s in fake.issued]
    per_step = [1, 1, 1, 1, 1]  # one per tool step: the parallel pair shares one
    for i, body in enumerate(sent[1:], start=1):
        assert signatures_sent(body) == issued[: sum(per_step[:i])]
    parallel = sent[3]["contents"][5]["parts"]
    assert [("thoughtSignature" in p, p["functionCall"]["args"]) for p in parallel] == [
        (True, {"n": 3}),
        (False, {"n": 4}),
    ]
    # The final answer's signature came on an empty closing text part and is kept.
    assert responses[-1].state == {
        "signedParts": [{"thoughtSignature": fake.issued[-1].replace("+", "-").replace("/", "_"),
                         "length": 0, "after": 0}]
    }  # fmt: skip
    # Thought summaries streamed as reasoning, before each iteration's text.
    assert said[:2] == [("reasoning", THOUGHT[: len(THOUGHT) // 2]),
                        ("reasoning", THOUGHT[len(THOUGHT) // 2 :])]  # fmt: skip
    assert said[-4:] == [
        ("reasoning", THOUGHT[: len(THOUGHT) // 2]),
        ("reasoning", THOUGHT[len(THOUGHT) // 2 :]),
        ("text", "All six"),
        ("text", " echoed."),
    ]
    assert all(r.reasoning[0].text == THOUGHT for r in responses)
    assert all(r.origin == "gemini:gemini-test" for r in responses)
    # The thinking config went out as the spec asked, on every request.
    assert {json.dumps(b["generationConfig"], sort_keys=True) for b in sent} == {
        json.dumps({"thinkingConfig": {"include_thoughts": True, "thinking_level": "LOW"}})
    }


async def test_without_the_pass_back_the_loop_fails_with_the_providers_400(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forget_signatures(monkeypatch)
    fake = FakeGemini(loop_steps())
    with LoopbackServer(respond=fake) as server:
        caller = GEMINI.caller(server, reasoning=SUMMARY)
        assert isinstance(caller, GeminiCaller)
        with pytest.raises(ModelProviderError) as info:
            await run_loop(caller)
        await caller.aclose()
        attempts = len(server.requests)

    missing = MISSING_SIGNATURE.format(name="t__echo", position=2)
    assert fake.rejected == [missing]
    assert attempts == 2  # the second request, and no retry: a retry cannot help
    assert info.value.code == ModelProviderError.code
    assert "request rejected (HTTP 400): Function call is missing a thought_signature" in (
        info.value.message
    )


async def test_a_signature_that_was_changed_is_refused_as_corrupted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = GeminiCodec.messages

    def tampering(self: GeminiCodec, messages: Any, encode: Any) -> Any:
        out = real(self, messages, encode)
        for content in out.messages:
            for part in content["parts"]:
                if "thoughtSignature" in part:
                    part["thoughtSignature"] = "QUJD" + part["thoughtSignature"][4:]
        return out

    monkeypatch.setattr(GeminiCodec, "messages", tampering)
    fake = FakeGemini(loop_steps())
    with LoopbackServer(respond=fake) as server, pytest.raises(ModelProviderError) as info:
        await run_loop(GEMINI.caller(server))
    assert fake.rejected == [CORRUPTED_SIGNATURE]
    assert info.value.message.endswith("request rejected (HTTP 400): Corrupted thought signature.")


async def test_a_calls_signature_moved_to_another_call_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gemini: "you must return this signature in the exact part where it was received"."""
    real = GeminiCodec.messages

    def swapping(self: GeminiCodec, messages: Any, encode: Any) -> Any:
        out = real(self, messages, encode)
        calls = [p for c in out.messages for p in c["parts"] if "functionCall" in p]
        signed = [p for p in calls if "thoughtSignature" in p]
        if len(signed) == 2:
            signed[0]["thoughtSignature"], signed[1]["thoughtSignature"] = (
                signed[1]["thoughtSignature"],
                signed[0]["thoughtSignature"],
            )
        return out

    monkeypatch.setattr(GeminiCodec, "messages", swapping)
    fake = FakeGemini(loop_steps())
    with LoopbackServer(respond=fake) as server, pytest.raises(ModelProviderError) as info:
        await run_loop(GEMINI.caller(server))
    assert len(server.requests) == 3  # the first two steps were fine
    assert fake.rejected == [CORRUPTED_SIGNATURE]
    assert "Corrupted thought signature." in info.value.message


async def test_usage_comes_from_geminis_own_fields() -> None:
    fake = FakeGemini(loop_steps())
    with LoopbackServer(respond=fake) as server:
        responses, _ = await run_loop(GEMINI.caller(server, reasoning=SUMMARY))
    expected = [
        Usage(
            u["promptTokenCount"],
            u["candidatesTokenCount"] + u["thoughtsTokenCount"],
            cache_read_tokens=u.get("cachedContentTokenCount"),
            reasoning_tokens=u["thoughtsTokenCount"],
        )
        for u in fake.reported
    ]
    assert [r.usage for r in responses] == expected
    first = responses[0].usage
    assert first is not None
    assert first.cache_read_tokens is None
    # From the second request on, the previous request's prefix was read from the cache.
    assert all(
        r.usage is not None and r.usage.cache_read_tokens and r.usage.reasoning_tokens == 32
        for r in responses[1:]
    )


# -- the request ---------------------------------------------------------------------------


async def test_absent_reasoning_sends_todays_request_unchanged() -> None:
    """Pinned: no thinkingConfig, nor anything else new, without ``reasoning``."""
    fake = FakeGemini([Step(text="Hi.")])
    with LoopbackServer(respond=fake) as server:
        await GEMINI.caller(server)(request([Message("user", "Hello")], 1, []))
        [sent] = server.requests
    assert sent.body == {
        "contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "t__echo",
                        "description": "Echo.",
                        "parameters_json_schema": {"type": "object"},
                    }
                ]
            }
        ],
        "generationConfig": {},
    }


@pytest.mark.parametrize(
    ("reasoning", "config"),
    [
        (ReasoningSettings(effort="minimal"), {"thinking_level": "MINIMAL"}),
        (ReasoningSettings(effort="high", summary=True),
         {"thinking_level": "HIGH", "include_thoughts": True}),
        (ReasoningSettings(budget_tokens=2048), {"thinking_budget": 2048}),
        # Gemini refuses both: the budget, the more precise of the two, wins
        (ReasoningSettings(effort="low", budget_tokens=512), {"thinking_budget": 512}),
        (ReasoningSettings(summary=True), {"include_thoughts": True}),
    ],
)  # fmt: skip
async def test_reasoning_becomes_gemini_thinking_config(
    reasoning: ReasoningSettings, config: dict[str, Any]
) -> None:
    fake = FakeGemini([Step(text="Hi.")])
    with LoopbackServer(respond=fake) as server:
        await GEMINI.caller(server, reasoning=reasoning)(request([Message("user", "Hi")], 1, []))
        [sent] = server.requests
    assert sent.body["generationConfig"] == {"thinkingConfig": config}
    assert fake.rejected == []


async def test_a_level_the_model_does_not_offer_fails_with_geminis_message() -> None:
    fake = FakeGemini([Step(text="Hi.")], levels=("LOW", "HIGH"))  # a Pro model
    with LoopbackServer(respond=fake) as server:
        caller = GEMINI.caller(server, reasoning=ReasoningSettings(effort="medium"))
        with pytest.raises(ModelProviderError) as info:
            await caller(request([Message("user", "Hi")], 1, []))
        assert len(server.requests) == 1
    assert info.value.message == (
        "gemini:gemini-test: request rejected (HTTP 400): "
        + UNSUPPORTED_LEVEL.format(level="MEDIUM")
    )


# -- through the run service ---------------------------------------------------------------


def service_for(tmp_path: Path) -> RunService:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
    echo = ToolSpec("t/echo", "Echo.", {"type": "object"}, lambda inputs: inputs.get("n"))
    return RunService(settings, [echo])


def model_spec(server: LoopbackServer, model: str = "gemini-test") -> dict[str, Any]:
    return {
        "provider": "gemini",
        "model": model,
        "baseUrl": server.base_url,
        "maxRetries": 0,
        "reasoning": {"effort": "low", "summary": True},
    }


async def test_the_run_service_completes_the_loop_and_streams_reasoning_before_text(
    tmp_path: Path,
) -> None:
    fake = FakeGemini(loop_steps())
    service = service_for(tmp_path)
    with LoopbackServer(respond=fake) as server:
        handle = await service.start(
            RunRequest(prompt="Echo one to six.", model=model_spec(server), run_id="r1",
                       automation_profile="trusted")
        )  # fmt: skip
        events = [e async for e in handle.events()]
        result = await handle.result()
    await service.aclose()

    assert fake.rejected == []
    assert (result.status, result.content, result.iterations) == ("completed", "All six echoed.", 6)
    assert [r.output for r in result.tool_call_history] == [1, 2, 3, 4, 5, 6]
    streamed = [
        (type(e).__name__, e.iteration, e.text)
        for e in events
        if isinstance(e, ReasoningDelta | MessageDelta)
    ]
    half = len(THOUGHT) // 2
    for iteration in range(1, 7):
        mine = [(kind, text) for kind, it, text in streamed if it == iteration]
        assert mine[:2] == [("ReasoningDelta", THOUGHT[:half]), ("ReasoningDelta", THOUGHT[half:])]
        assert all(kind == "MessageDelta" for kind, _ in mine[2:])
    usages = [e.usage for e in events if isinstance(e, IterationFinished)]
    assert [u.reasoning_tokens if u else None for u in usages] == [32] * 6
    assert [bool(u and u.cache_read_tokens) for u in usages] == [False] + [True] * 5
    total = sum((u for u in usages if u), Usage())
    assert result.usage == total


async def test_the_run_service_fails_the_run_with_the_400_without_the_pass_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget_signatures(monkeypatch)
    fake = FakeGemini(loop_steps())
    service = service_for(tmp_path)
    with LoopbackServer(respond=fake) as server:
        handle = await service.start(
            RunRequest(prompt="Echo one to six.", model=model_spec(server), run_id="r1",
                       automation_profile="trusted")
        )  # fmt: skip
        result = await handle.result()
    await service.aclose()

    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == ModelProviderError.code
    assert "Function call is missing a thought_signature in functionCall parts" in (
        result.error.message
    )
    assert fake.rejected == [MISSING_SIGNATURE.format(name="t__echo", position=2)]


async def test_a_conversation_continued_on_another_model_drops_the_signatures_and_runs(
    tmp_path: Path,
) -> None:
    """Signatures are the first model's: another model gets none (the fake would refuse a
    signature it did not issue) and the reasoning as text; the old turn is not checked."""
    first = FakeGemini(loop_steps())
    service = service_for(tmp_path)
    with LoopbackServer(respond=first) as server:
        handle = await service.start(
            RunRequest(prompt="Echo one to six.", model=model_spec(server), run_id="r1",
                       automation_profile="trusted")
        )  # fmt: skip
        assert (await handle.result()).status == "completed"
    second = FakeGemini([Step(text="Continued.")], secret=b"another model")
    with LoopbackServer(respond=second) as server:
        handle = await service.start(
            RunRequest(prompt="And again?", model=model_spec(server, "gemini-other"),
                       run_id="r2", continue_from="r1", automation_profile="trusted")
        )  # fmt: skip
        result = await handle.result()
        [sent] = [r.body for r in server.requests]
    await service.aclose()

    assert (result.status, result.content) == ("completed", "Continued.")
    assert second.rejected == []
    assert signatures_sent(sent) == []
    model_text = [p["text"] for c in sent["contents"] if c["role"] == "model" for p in c["parts"]
                  if "text" in p]  # fmt: skip
    assert model_text[0] == f"<thinking>\n{THOUGHT}\n</thinking>"


async def test_a_conversation_continued_after_a_restart_sends_every_signature_back(
    tmp_path: Path,
) -> None:
    """The transcript keeps the signatures (the calls' and the closing text part's), so
    the same model gets them all back, unchanged, from a new process."""
    fake = FakeGemini([*loop_steps(), Step(text="Again.")])
    with LoopbackServer(respond=fake) as server:
        first = service_for(tmp_path)
        handle = await first.start(
            RunRequest(prompt="Echo one to six.", model=model_spec(server), run_id="r1",
                       automation_profile="trusted")
        )  # fmt: skip
        assert (await handle.result()).status == "completed"
        await first.aclose()
        second = service_for(tmp_path)
        handle = await second.start(
            RunRequest(prompt="Once more.", model=model_spec(server), run_id="r2",
                       continue_from="r1", automation_profile="trusted")
        )  # fmt: skip
        result = await handle.result()
        await second.aclose()
        last = server.requests[-1].body

    assert (result.status, result.content) == ("completed", "Again.")
    assert fake.rejected == []
    assert signatures_sent(last) == [base64.b64decode(s) for s in fake.issued[:-1]]
    closing = [p for c in last["contents"] for p in c["parts"] if p.get("text") == ""]
    assert [("thoughtSignature" in p) for p in closing] == [True]
