"""A run on the editor's own model (``client``, through ``llm/generate``) answers an MCP
server's sampling request with that model too: the ``llm/generate`` call has no tools,
the server's messages, and its ``maxTokens``, ``temperature`` and ``stopSequences``; the
answer is named ``client`` and its usage counts in the run's. Through the real daemon,
the Python client and a real SDK server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cleveragents.client import Client
from kit.paths import MCP_SERVERS

ASK = {"text": "What is 2+2?", "max_tokens": 7, "temperature": 0.4, "stop": ["END"],
       "system": "One word."}  # fmt: skip


async def test_the_editor_s_model_gets_the_server_s_settings(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def model(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params)
        if not params["tools"]:  # the server's sampling request
            return {"content": "Four.", "toolCalls": [],
                    "usage": {"inputTokens": 30, "outputTokens": 2}}  # fmt: skip
        if params["messages"][-1]["role"] == "tool":
            return {"content": "done", "toolCalls": [],
                    "usage": {"inputTokens": 100, "outputTokens": 1}}  # fmt: skip
        call = {"id": "c1", "name": "mcp:samp/sample", "arguments": ASK}
        return {"content": "", "toolCalls": [call],
                "usage": {"inputTokens": 90, "outputTokens": 5}}  # fmt: skip

    async with await Client.spawn(tmp_path, state_dir=tmp_path / "state", llm=True) as client:
        client.llm_handler = model
        server = {"name": "samp", "command": sys.executable,
                  "args": [str(MCP_SERVERS / "sampling_server.py")]}  # fmt: skip
        await client.add_mcp_servers([server])
        result = await client.run("ask", model="client", automation_profile="trusted")
    assert result["status"] == "completed", result.get("error")
    (sampling,) = [params for params in calls if not params["tools"]]
    assert (sampling["maxTokens"], sampling["temperature"], sampling["stopSequences"]) == (
        7, 0.4, ["END"],
    )  # fmt: skip
    assert sampling["messages"] == [
        {"role": "system", "content": "One word."},
        {"role": "user", "content": "What is 2+2?"},
    ]
    turns = [params for params in calls if params["tools"]]
    assert all("maxTokens" not in params for params in turns)  # a turn has the model's own
    (record,) = result["toolCallHistory"]
    assert json.loads(record["output"]) == {"text": "Four.", "model": "client",
                                            "stopReason": "endTurn"}  # fmt: skip
    assert result["usage"] == {"inputTokens": 220, "outputTokens": 8}
