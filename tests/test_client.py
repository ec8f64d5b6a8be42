"""The Python client against the real daemon: tools, permissions and a lent model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cleveragents.client import Client, RpcError
from cleveragents.llm.errors import ModelConfigError


async def test_the_client_lends_its_model_and_serves_its_tools(tmp_path: Path) -> None:
    events: list[str] = []

    def model(params: dict[str, Any]) -> dict[str, Any]:
        if params["iteration"] == 1:
            client.send_llm_delta(params["runId"], 1, "Asking")
            return {"content": "Asking", "toolCalls": [
                {"id": "c1", "name": "client/add", "arguments": {"a": 2, "b": 3}}]}  # fmt: skip
        tool_result = params["messages"][-1]
        return {"content": f"sum is {tool_result['content']}", "toolCalls": []}

    async with await Client.spawn(tmp_path, state_dir=tmp_path / "state", llm=True) as client:
        client.llm_handler = model
        await client.register_tool(
            "client/add", "Add two numbers.",
            {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
            lambda args: args["a"] + args["b"], annotations={"readOnly": True},
        )  # fmt: skip
        result = await client.run("add", model="client", on_event=lambda m, p: events.append(m))
    assert result["status"] == "completed"
    assert result["content"] == "sum is 5"
    assert result["toolCallHistory"][0]["output"] == 5
    assert events[0] == "run/started"
    assert events[1] == "run/messageDelta"
    assert events[-1] == "run/finished"


async def test_client_errors_carry_the_daemon_code(tmp_path: Path) -> None:
    async with await Client.spawn(tmp_path, state_dir=tmp_path / "state") as client:
        with pytest.raises(RpcError) as info:
            await client.run("x")
    assert info.value.code == ModelConfigError.code
