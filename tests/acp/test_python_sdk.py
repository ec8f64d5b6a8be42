"""A full turn driven by the official Python SDK's client side (``agent-client-protocol``,
import ``acp``): its pydantic models validate every message we send it."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kit.models import call, scripted

acp = pytest.importorskip("acp")
schema = pytest.importorskip("acp.schema")


class RecordingClient:
    """The SDK's ``Client`` protocol: permission allowed, updates kept."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.asked: list[Any] = []

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        self.asked.append(tool_call)
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id="allow_once")
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    def on_connect(self, conn: Any) -> None:
        pass


async def test_the_python_sdk_client_runs_a_turn_with_a_permission_and_a_diff(
    workspace: Path, state_dir: Path
) -> None:
    model = scripted(
        {"content": "Editing.", "toolCalls": [
            call("builtin/file-edit", path="src/greet.py", old_text='"hi"', new_text='"hey"')
        ]},
        {"content": "Done."},
    )  # fmt: skip
    client = RecordingClient()
    command = [
        "-m", "cleveragents", "serve", "--protocol", "acp", "--model", json.dumps(model),
        "--state-dir", str(state_dir),
    ]  # fmt: skip
    async with asyncio.timeout(30):
        async with acp.spawn_agent_process(client, sys.executable, *command) as (conn, _proc):
            init = await conn.initialize(protocol_version=1)
            assert init.agent_info is not None
            assert init.agent_info.name == "cleveragents"
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            reply = await conn.prompt(
                session_id=session.session_id,
                prompt=[schema.TextContentBlock(type="text", text="go")],
            )
            assert reply.stop_reason == "end_turn"
    assert len(client.asked) == 1
    finals = [u for u in client.updates if getattr(u, "status", None) == "completed"]
    (edit,) = finals
    diff = edit.content[0]
    assert diff.type == "diff"
    assert diff.new_text == 'def greet():\n    return "hey"\n'
    texts = [u.content.text for u in client.updates if u.session_update == "agent_message_chunk"]
    assert texts == ["Editing.", "Done."]
