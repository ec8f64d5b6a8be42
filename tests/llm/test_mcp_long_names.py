"""An MCP tool whose full name is past the providers' 64-character limit, through the
OpenAI adapter against a loopback server: the model is offered a shortened name, calls
it, and the call reaches the real MCP server under its exact name."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from cleveragents.llm.builtin.openai import OpenAIChatCaller
from cleveragents.llm.spec import ModelSpec
from cleveragents.mcp import McpServer, McpServerConfig
from cleveragents.tool import (
    ToolActorContext,
    ToolCallingRuntime,
    ToolCallRouter,
    ToolRegistry,
    ToolRunner,
)
from kit.loopback import LoopbackServer, data, sse_reply
from kit.paths import SDK_SERVER

SERVER_NAME = "issue-tracker-of-the-platform-team-in-the-north-region"  # 54 characters
FULL_NAME = f"mcp:{SERVER_NAME}/echo_text"  # 68 characters


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return data({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip


async def test_a_long_mcp_tool_name_round_trips_through_the_openai_adapter(
    server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-long-names")
    encoded = ToolCallRouter("openai").encode_name(FULL_NAME)
    assert len(encoded) <= 64
    assert len(FULL_NAME) > 64
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": encoded, "arguments": '{"text": "through"}'}}  # fmt: skip
    server.queue(
        sse_reply(_chunk({"role": "assistant", "tool_calls": [call]}),
                  _chunk({}, finish="tool_calls"), "data: [DONE]\n\n"),
        sse_reply(_chunk({"role": "assistant", "content": "done"}), _chunk({}, finish="stop"),
                  "data: [DONE]\n\n"),
    )  # fmt: skip
    mcp = McpServer(
        McpServerConfig(name=SERVER_NAME, command=sys.executable, args=(str(SDK_SERVER),),
                        trust="read"),
        scope="run", log_dir=tmp_path, base_env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    mcp.start()
    try:
        await mcp.wait_ready(timeout=20)
        assert mcp.status == "ready", mcp.error
        registry = ToolRegistry()
        for spec in mcp.tool_specs():
            registry.register(spec)
        model = OpenAIChatCaller(ModelSpec("openai", model="m", base_url=f"{server.base_url}/v1"))
        runtime = ToolCallingRuntime(registry, ToolRunner(registry), model, max_iterations=3)
        result = await runtime.arun_tool_loop("go", ToolActorContext(sandbox_root=str(tmp_path)))
    finally:
        await mcp.stop()
    (record,) = result.tool_call_history
    assert record.tool_name == FULL_NAME
    assert record.success, record.error
    assert record.output == "through"
    offered = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert encoded in offered
    assert all(len(name) <= 64 for name in offered)
    assert result.content == "done"
