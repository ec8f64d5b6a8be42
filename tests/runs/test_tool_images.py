"""A tool's image reaches the model as an image, each provider its own way, through the
real run service and the real adapters against enforcing fakes (``kit.fake_media``:
each refuses an image where its provider would, with its own 400): Anthropic in the
``tool_result``, Gemini 3 inside the ``functionResponse``, the Responses API in the
function call's output, Chat Completions in a user message after the turn's tool
messages. The record keeps the blocks; the text says ``[image: ...]``, never base64."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.tool import (
    LLMRequest,
    LLMResponse,
    Message,
    RunResult,
    ToolCall,
    ToolCallingRuntime,
    ToolCallRecord,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
    Usage,
    tool_message,
)
from cleveragents.tool._context import estimate_message_tokens
from kit.fake_anthropic import FakeAnthropic
from kit.fake_anthropic import Turn as ClaudeTurn
from kit.fake_gemini import FakeGemini, Step
from kit.fake_media import anthropic_problem, chat_problem, gemini_problem, responses_problem
from kit.fake_openai import FakeResponses, FakeThinkingChat
from kit.loopback import LoopbackServer

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()
BLOCKS = [
    {"type": "text", "text": "a red dot"},
    {"type": "image", "data": PNG, "mimeType": "image/png"},
    {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
]


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789SECRET")
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFake-0123456789abcdefXYZ")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789SECRET")


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[RunService]:
    root = tmp_path / "ws"
    root.mkdir()
    picture = ToolSpec("t/picture", "A picture.", {"type": "object"}, lambda i: BLOCKS)
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
    service = RunService(settings, [picture])
    try:
        yield service
    finally:
        await service.aclose()


async def run(
    service: RunService, fake: Any, model: dict[str, Any]
) -> tuple[RunResult, list[dict[str, Any]]]:
    with LoopbackServer(respond=fake) as server:
        base = server.base_url + ("/v1" if model["provider"].startswith("openai") else "")
        handle = await service.start(
            RunRequest(
                prompt="Look at the picture.", model={**model, "baseUrl": base, "maxRetries": 0},
                automation_profile="trusted",
            )
        )  # fmt: skip
        return await handle.result(), [r.body for r in server.requests]


def the_record_keeps_the_blocks(result: RunResult) -> None:
    assert result.status == "completed", result.error
    (record,) = result.tool_call_history
    assert record.output == BLOCKS


async def test_claude_gets_the_image_in_its_tool_result(service: RunService) -> None:
    claude = FakeAnthropic(
        [ClaudeTurn(calls=(("t__picture", {}),))], final=ClaudeTurn(text="A red dot.")
    )
    result, sent = await run(
        service, claude, {"provider": "anthropic", "model": "claude-sonnet-4-5"}
    )
    the_record_keeps_the_blocks(result)
    assert claude.refusals == []
    (answer,) = [
        b for m in sent[-1]["messages"] for b in m["content"] if b["type"] == "tool_result"
    ]
    text, image = answer["content"]
    assert text == {
        "type": "text",
        "text": "a red dot\n[image: image/png, 72 B]\n[audio: audio/wav, 18 B]",
    }
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    }


async def test_gemini_gets_the_media_inside_its_function_response(service: RunService) -> None:
    gemini = FakeGemini([Step(calls=(("t__picture", {}),)), Step(text="A red dot.")])
    model = {"provider": "gemini", "model": "gemini-3-flash-preview"}
    result, sent = await run(service, gemini, model)
    the_record_keeps_the_blocks(result)
    assert gemini.rejected == []
    (response,) = [
        p["functionResponse"]
        for c in sent[-1]["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert response["parts"] == [  # as the SDK writes them on the wire (proto JSON)
        {"inline_data": {"mime_type": "image/png", "data": PNG}},
        {"inline_data": {"mime_type": "audio/wav", "data": WAV}},
    ]
    assert PNG not in str(response["response"])


async def test_the_responses_api_gets_the_image_in_the_function_output(service: RunService) -> None:
    responses = FakeResponses(calls=1, parallel_at=frozenset(), text_at=frozenset())
    model = {"provider": "openai", "api": "responses", "model": "gpt-5-mini"}
    result, _ = await run(service, responses, model)
    the_record_keeps_the_blocks(result)
    assert responses.replies == [200, 200]
    (output,) = [
        i["output"]
        for i in responses.requests[-1]["input"]
        if i.get("type") == "function_call_output"
    ]
    assert output[0]["type"] == "input_text"
    assert "[image: image/png" in output[0]["text"]
    assert output[1] == {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
    assert len(output) == 2  # audio stays a placeholder: not an input this output takes


async def test_chat_completions_gets_the_image_in_a_user_message_after_the_tool_message(
    service: RunService,
) -> None:
    chat = FakeThinkingChat(calls=1, parallel_at=frozenset(), field="reasoning", enforce=False)
    result, _ = await run(service, chat, {"provider": "openai", "model": "qwen3-test"})
    the_record_keeps_the_blocks(result)
    assert chat.replies == [200, 200]
    messages = chat.requests[-1]["messages"]
    tool, after = messages[-2], messages[-1]
    assert tool["role"] == "tool"
    assert PNG not in tool["content"]
    assert "[image: image/png, 72 B]" in tool["content"]
    assert after == {"role": "user", "content": [
        {"type": "text", "text": f"Images from tool call {tool['tool_call_id']}:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]}  # fmt: skip


async def test_a_text_only_model_reads_the_placeholders_when_its_spec_says_media_false(
    service: RunService,
) -> None:
    model = {"provider": "openai", "model": "qwen3-8b"}
    refusing = FakeThinkingChat(calls=1, parallel_at=frozenset(), field="reasoning", enforce=False,
                                text_only=True)  # fmt: skip
    result, _ = await run(service, refusing, model)
    assert result.status == "failed"
    assert "qwen3-8b is not a multimodal model" in str(result.error)
    chat = FakeThinkingChat(calls=1, parallel_at=frozenset(), field="reasoning", enforce=False,
                            text_only=True)  # fmt: skip
    result, _ = await run(service, chat, {**model, "media": False})
    the_record_keeps_the_blocks(result)
    assert chat.replies == [200, 200]
    messages = chat.requests[-1]["messages"]
    assert messages[-1]["role"] == "tool"
    assert "[image: image/png, 72 B]" in messages[-1]["content"]
    assert PNG not in str(messages)


def test_the_text_names_each_medium_and_a_bad_one_is_never_sent() -> None:
    bad = [
        {"type": "image", "data": "not base64!", "mimeType": "image/png"},
        {"type": "image", "data": PNG, "mimeType": "text/html"},
    ]
    message = tool_message(ToolCallRecord("t/x", {}, bad, 1.0, True, None, 1, "c1", None))
    assert message.content == "[image: image/png, 8 B]\n[image: ?, 72 B]"
    assert message.media == []
    plain = tool_message(
        ToolCallRecord("t/x", {}, [{"type": "text", "text": "hi"}], 1.0, True, None, 1, "c1", None)
    )
    assert plain == Message("tool", '[{"type": "text", "text": "hi"}]', [], "c1", "t/x")


def test_the_fakes_refuse_images_where_their_providers_do() -> None:
    image_part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    call = {"role": "assistant", "tool_calls": [{"id": "c1"}, {"id": "c2"}]}
    in_tool = [call, {"role": "tool", "tool_call_id": "c1", "content": [image_part]}]
    between = [call, {"role": "tool", "tool_call_id": "c1", "content": "x"},
               {"role": "user", "content": [image_part]},
               {"role": "tool", "tool_call_id": "c2", "content": "y"}]  # fmt: skip
    assert "expected 'text' in a tool message" in (chat_problem(in_tool) or "")
    assert "did not have response messages: c2" in (chat_problem(between) or "")
    gif_as_svg = {"type": "base64", "media_type": "image/svg+xml", "data": PNG}
    claude = [{"role": "user", "content": [{"type": "tool_result", "content": [
        {"type": "image", "source": gif_as_svg}]}]}]  # fmt: skip
    assert "Input should be 'image/jpeg'" in (anthropic_problem(claude) or "")
    sibling = [{"parts": [{"functionResponse": {"name": "t", "parts": [{"text": "x"}]}}]}]
    assert "inline_data or file_data" in (gemini_problem(sibling) or "")
    output = [{"type": "function_call_output", "output": [{"type": "image_url"}]}]
    assert "Supported values are" in (responses_problem(output) or "")


class ImageCountingModel:
    """Calls ``t/picture`` every iteration until ``turns``, counting each image as a
    provider does (a fixed cost, not its base64), and reporting that count as its usage."""

    blocking = False

    def __init__(self, window: int, turns: int) -> None:
        self.context_window = window
        self.turns = turns
        self.seen: list[list[Message]] = []

    def __call__(self, request: LLMRequest) -> LLMResponse:
        self.seen.append(list(request.messages))
        size = sum(len(m.content) // 4 + 1600 * len(m.media) for m in request.messages)
        if request.iteration >= self.turns:
            return LLMResponse("done", usage=Usage(size, 5))
        call = ToolCall(f"c{request.iteration}", "t/picture", {})
        return LLMResponse("looking", [call], usage=Usage(size, 5))


def test_pruning_drops_old_images_and_counts_each_as_a_fixed_cost() -> None:
    registry = ToolRegistry()
    registry.register(ToolSpec("t/picture", "A picture.", {"type": "object"}, lambda i: BLOCKS))
    model = ImageCountingModel(window=12_000, turns=20)
    runtime = ToolCallingRuntime(registry, ToolRunner(registry), model, max_iterations=50)
    result = runtime.run_tool_loop("look at each picture")
    assert result.content == "done"
    last = [m for m in model.seen[-1] if m.role == "tool"]
    assert not last[0].media  # pruned: its images left with its text
    assert "was cut from the conversation" in last[0].content
    assert last[-1].media  # the latest keep theirs
    assert all(r.output == BLOCKS for r in result.tool_call_history)  # records keep blocks
    with_media = Message("tool", "x", [], "c1", "t/x", media=last[-1].media)
    assert estimate_message_tokens(with_media) == estimate_message_tokens(
        Message("tool", "x", [], "c1", "t/x")
    ) + 1600 * len(last[-1].media)
