"""AnthropicCaller through the real ``anthropic`` SDK against a loopback server: what only
the messages API does (its request body: ``system`` apart, tool results as blocks, the
required ``max_tokens``, prompt-cache breakpoints, and how ``reasoning`` becomes
``thinking``). What every provider does is ``test_provider_contract.py``'s; a whole tool
loop with thinking and caching against an enforcing fake is
``test_anthropic_thinking.py``'s."""

from __future__ import annotations

from typing import Any

import pytest

from cleveragents.llm import ModelProviderError, parse_model_spec
from cleveragents.llm.builtin.anthropic import AnthropicCaller, claude_version, takes_adaptive
from cleveragents.llm.spec import ModelSpec, ReasoningSettings
from cleveragents.tool import LLMResponse, Message, Reasoning, ToolCall, ToolSchema, Usage
from kit.fake_anthropic import (
    BUDGET_NOT_BELOW_MAX,
    BUDGET_TOO_SMALL,
    ENABLED_NOT_SUPPORTED,
    INTERLEAVED_BETA,
    TEMPERATURE_WITH_THINKING,
    FakeAnthropic,
)
from kit.loopback import LoopbackServer, event, make_request, sse_reply

from .kits import ANTHROPIC, anthropic_message_start, anthropic_text_stream
from .kits import anthropic_message_end as message_end
from .kits import anthropic_text_block as text_block

KEY = "sk-ant-test-0123456789SECRET"
READ = ToolSchema(
    "builtin/file-read",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
OTHER = ToolSchema("server:local/tool", "A server tool.", {"type": "object"})
THOUGHT = {"type": "thinking", "thinking": "hmm", "signature": "sig-1"}
INTERLEAVED = INTERLEAVED_BETA
HISTORY = [
    Message("system", "Be brief."),
    Message("user", "Read a.txt"),
    Message(
        "assistant",
        "Reading.",
        tool_calls=[ToolCall("toolu_0", "server:local/tool", {"q": 1})],
    ),
    Message("tool", "denied", tool_call_id="toolu_0", name="server:local/tool", is_error=True),
]


def caller(server: LoopbackServer, **spec_kw: object) -> AnthropicCaller:
    made = ANTHROPIC.caller(server, **spec_kw)
    assert isinstance(made, AnthropicCaller)
    return made


def caller_of(server: LoopbackServer, model: str, **spec_kw: Any) -> AnthropicCaller:
    """A caller of a named model (the kit's is ``claude-test``)."""
    spec = ModelSpec("anthropic", model=model, base_url=server.base_url, **spec_kw)
    return AnthropicCaller(spec, base_delay_s=0.001, max_delay_s=0.002)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


async def test_streams_text_and_tool_input_split_mid_json_with_usage(
    server: LoopbackServer,
) -> None:
    """With ``cache: false`` and no ``reasoning`` the body is the one sent before either
    existed, field for field (and no beta header)."""
    tool_start = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "builtin__file-read",
        "input": {},
    }
    fragments = ["", '{"pa', 'th": "a.', 'txt"}']
    server.queue(
        sse_reply(
            anthropic_message_start(input_tokens=120),
            event({"type": "ping"}),
            *text_block(0, "Let me ", "look."),
            event({"type": "content_block_start", "index": 1, "content_block": tool_start}),
            *(
                event(
                    {
                        "type": "content_block_delta",
                        "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": fragment},
                    }
                )
                for fragment in fragments
            ),
            event({"type": "content_block_stop", "index": 1}),
            *message_end("tool_use", 31),
        )
    )
    deltas: list[str] = []
    response = await caller(server, cache=False)(
        make_request(HISTORY, [READ], deltas=deltas, iteration=2)
    )
    assert deltas == ["Let me ", "look."]
    assert response == LLMResponse(
        content="Let me look.",
        tool_calls=[ToolCall("toolu_1", "builtin/file-read", {"path": "a.txt"})],
        usage=Usage(120, 31),
        stop_reason="tool_use",
        origin="anthropic:claude-test",
    )
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    auth = sent.headers.get("x-api-key") or sent.headers["authorization"].removeprefix("Bearer ")
    assert auth == KEY
    assert "anthropic-beta" not in sent.headers
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "stream": True,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading."},
                    {
                        "type": "tool_use",
                        "id": "toolu_0",
                        "name": "server_-clocal__tool",
                        "input": {"q": 1},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_0",
                        "content": "denied",
                        "is_error": True,
                    }
                ],
            },
        ],
        "tools": [
            {
                "name": "builtin__file-read",
                "description": "Read a file.",
                "input_schema": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            }
        ],
    }


async def test_max_tokens_and_temperature_come_from_the_spec(server: LoopbackServer) -> None:
    server.queue(anthropic_text_stream())
    await caller(server, max_tokens=256, temperature=0.5)(make_request(HISTORY[:2]))
    body = server.requests[0].body
    assert (body["max_tokens"], body["temperature"]) == (256, 0.5)
    assert "tools" not in body


def marked(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": {"type": "ephemeral"}}


async def test_cache_breakpoints_mark_tools_system_and_the_last_two_turns_by_default(
    server: LoopbackServer,
) -> None:
    """Four breakpoints, the API's most: the last tool, the system prompt (now a text
    block), the last message, and the message two before it (where the previous request
    of the loop put its last one). Thinking blocks never carry one."""
    server.queue(anthropic_text_stream())
    history = [
        *HISTORY[:2],
        Message(
            "assistant", "", tool_calls=[ToolCall("toolu_0", "server:local/tool", {"q": 1})],
            reasoning=[Reasoning("hmm", dict(THOUGHT))], origin="anthropic:claude-test",
        ),
        HISTORY[3],
    ]  # fmt: skip
    await caller(server)(make_request(history, [READ, OTHER]))
    body = server.requests[0].body
    # No reasoning: no thinking field, no beta, the default max_tokens.
    assert set(body) == {"model", "max_tokens", "stream", "system", "messages", "tools"}
    assert body["max_tokens"] == 4096
    assert "anthropic-beta" not in server.requests[0].headers
    assert body["system"] == [marked({"type": "text", "text": "Be brief."})]
    assert [t.get("cache_control") for t in body["tools"]] == [None, {"type": "ephemeral"}]
    assert body["messages"] == [
        {"role": "user", "content": [marked({"type": "text", "text": "Read a.txt"})]},
        {
            "role": "assistant",
            "content": [
                THOUGHT,
                {
                    "type": "tool_use",
                    "id": "toolu_0",
                    "name": "server_-clocal__tool",
                    "input": {"q": 1},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                marked(
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_0",
                        "content": "denied",
                        "is_error": True,
                    }
                )
            ],
        },
    ]
    # The conversation and the caller's tool list are not marked: the next request
    # moves the breakpoints.
    assert history[2].reasoning[0].state == THOUGHT
    server.queue(anthropic_text_stream())
    await caller(server, cache=False)(make_request(history, [READ, OTHER]))
    assert "cache_control" not in str(server.requests[1].body)


@pytest.mark.parametrize(
    ("model", "reasoning", "thinking", "effort", "max_tokens", "beta"),
    [
        # Budgets: the spec's, else the effort's; max_tokens leaves 4,096 for the answer.
        ("claude-sonnet-4-5", {"budgetTokens": 3000}, {"type": "enabled", "budget_tokens": 3000}, None, 7096, INTERLEAVED),
        ("claude-sonnet-4-5", {"effort": "minimal"}, {"type": "enabled", "budget_tokens": 1024}, None, 5120, INTERLEAVED),
        ("claude-opus-4-1", {"effort": "high"}, {"type": "enabled", "budget_tokens": 16384}, None, 20480, INTERLEAVED),
        ("claude-haiku-4-5-20251001", {}, {"type": "enabled", "budget_tokens": 8192}, None, 12288, INTERLEAVED),
        # Claude 3.7 has no interleaved thinking; a compatible server gets no beta.
        ("claude-3-7-sonnet-latest", {"effort": "low"}, {"type": "enabled", "budget_tokens": 4096}, None, 8192, None),
        ("glm-4.6", {"effort": "low"}, {"type": "enabled", "budget_tokens": 4096}, None, 8192, None),
        # Claude 4.6 and later think adaptively, steered by effort (no "minimal" level).
        ("claude-opus-4-6", {"effort": "minimal"}, {"type": "adaptive"}, "low", 5120, None),
        ("claude-sonnet-4-6", {"effort": "medium", "summary": True}, {"type": "adaptive", "display": "summarized"}, "medium", 12288, None),
        ("claude-opus-4-7", {}, {"type": "adaptive"}, None, 20480, None),
        ("claude-fable-5", {"effort": "high"}, {"type": "adaptive"}, "high", 20480, None),
        # A budget asks for budgeted thinking whatever the model (4.7 refuses it, in its words).
        ("claude-opus-4-7", {"budgetTokens": 2048}, {"type": "enabled", "budget_tokens": 2048}, None, 6144, INTERLEAVED),
    ],
)  # fmt: skip
async def test_reasoning_becomes_thinking_as_the_model_takes_it(
    server: LoopbackServer,
    model: str,
    reasoning: dict[str, Any],
    thinking: dict[str, Any],
    effort: str | None,
    max_tokens: int,
    beta: str | None,
) -> None:
    server.queue(anthropic_text_stream())
    spec = parse_model_spec({"provider": "anthropic", "model": model, "reasoning": reasoning})
    made = caller_of(server, model, reasoning=spec.reasoning, cache=False)
    await made(make_request(HISTORY[:2]))
    [sent] = server.requests
    assert sent.body["thinking"] == thinking
    assert sent.body.get("output_config") == ({"effort": effort} if effort else None)
    assert sent.body["max_tokens"] == max_tokens
    assert sent.headers.get("anthropic-beta") == beta


async def test_a_max_tokens_of_the_spec_is_sent_as_given_beside_thinking(
    server: LoopbackServer,
) -> None:
    server.queue(anthropic_text_stream())
    reasoning = ReasoningSettings(budget_tokens=2048)
    await caller(server, max_tokens=8000, reasoning=reasoning)(make_request(HISTORY[:2]))
    assert server.requests[0].body["max_tokens"] == 8000


@pytest.mark.parametrize(
    ("model", "fields", "refusal"),
    [
        ("claude-opus-4-7", {"reasoning": ReasoningSettings(budget_tokens=2048)}, ENABLED_NOT_SUPPORTED),
        ("claude-sonnet-4-5", {"reasoning": ReasoningSettings(budget_tokens=512)}, BUDGET_TOO_SMALL),
        ("claude-3-7-sonnet-latest", {"reasoning": ReasoningSettings(budget_tokens=4096), "max_tokens": 4096}, BUDGET_NOT_BELOW_MAX),
        ("claude-sonnet-4-5", {"reasoning": ReasoningSettings(effort="low"), "temperature": 0.2}, TEMPERATURE_WITH_THINKING),
    ],
    ids=["budget-on-4.7", "budget-below-1024", "budget-not-below-max-tokens", "temperature"],
)  # fmt: skip
async def test_a_setting_the_model_refuses_fails_with_the_providers_message(
    model: str, fields: dict[str, Any], refusal: str
) -> None:
    fake = FakeAnthropic([])
    with LoopbackServer(respond=fake) as server:
        made = caller_of(server, model, **fields)
        with pytest.raises(ModelProviderError) as info:
            await made(make_request(HISTORY[:2]))
    assert fake.refusals == [refusal]
    assert str(info.value).startswith(f"anthropic:{model}: request rejected (HTTP 400): ")
    assert refusal[:120] in str(info.value)


@pytest.mark.parametrize(
    ("model", "version", "adaptive"),
    [
        ("claude-sonnet-4-5-20250929", (4, 5), False),
        ("claude-sonnet-4-20250514", (4, 0), False),  # a date is not a minor version
        ("claude-3-7-sonnet-latest", (3, 7), False),
        ("claude-opus-4-6", (4, 6), True),
        ("anthropic/claude-sonnet-4.6", (4, 6), True),
        ("claude-opus-5", (5, 0), True),
        ("claude-mythos-preview", None, True),  # a newer name, with no version in it
        ("deepseek-chat", None, False),  # an Anthropic-compatible server's model
    ],
)
def test_the_thinking_a_model_takes_is_read_from_its_id(
    model: str, version: tuple[int, int] | None, adaptive: bool
) -> None:
    assert (claude_version(model), takes_adaptive(model)) == (version, adaptive)
