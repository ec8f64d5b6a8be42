"""The ACP face's instructions, as a provider on loopback receives them: an editor's
session gets the default system message with the workspace's AGENTS.md, and
``serve --protocol acp --no-instructions`` sends the user's words alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kit.acp import Spawn
from kit.loopback import LoopbackServer, data, sse_reply


def answer(words: str) -> Any:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": words},
                          "finish_reason": "stop"}]}  # fmt: skip
    return sse_reply(data(chunk), "data: [DONE]\n\n")


@pytest.mark.parametrize("flags", [(), ("--no-instructions",)])
async def test_an_editor_session_gets_agents_md_unless_serve_says_no_instructions(
    spawn: Spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...]
) -> None:
    monkeypatch.setenv("CA_ACP_TEST_KEY", "sk-acp-test")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Use tabs, never spaces.\n")
    with LoopbackServer() as server:
        server.queue(answer("Noted."))
        model = {"provider": "openai", "model": "gpt-test", "baseUrl": f"{server.base_url}/v1",
                 "apiKeyEnv": "CA_ACP_TEST_KEY", "maxRetries": 0}  # fmt: skip
        client = await spawn(json.dumps(model), *flags)
        session = (await client.new_session(ws))["sessionId"]
        assert await client.prompt(session, "hello") == {"stopReason": "end_turn"}
    [request] = server.requests
    messages = request.body["messages"]
    if flags:
        assert messages == [{"role": "user", "content": "hello"}]
    else:
        assert messages[0]["role"] == "system"
        assert f"Workspace root: {ws}" in messages[0]["content"]
        assert "Use tabs, never spaces." in messages[0]["content"]
        assert messages[1] == {"role": "user", "content": "hello"}
