"""AnthropicCaller through the real ``anthropic`` SDK against a loopback server: what only
the messages API does (its request body: ``system`` apart, tool results as blocks, the
required ``max_tokens``). What every provider does is ``test_provider_contract.py``'s."""

from __future__ import annotations

import pytest

from cleveragents.llm.builtin.anthropic import AnthropicCaller
from cleveragents.tool import LLMResponse, Message, ToolCall, ToolSchema, Usage
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


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


async def test_streams_text_and_tool_input_split_mid_json_with_usage(
    server: LoopbackServer,
) -> None:
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
    response = await caller(server)(make_request(HISTORY, [READ], deltas=deltas, iteration=2))
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
