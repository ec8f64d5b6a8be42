"""Cancel (``session/cancel``, ``$/cancel_request``) and hostile input over ACP."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from cleveragents.tool import JsonRpcCode
from kit.acp import AcpClient, Spawn, serve_command, tool_updates
from kit.models import call, scripted

SLOW = scripted(
    {"content": "Running.", "toolCalls": [call("builtin/shell", command="sleep 20")]},
    {"content": "never reached"},
)


def _in_progress(message: dict[str, Any]) -> bool:
    update = message.get("params", {}).get("update", {})
    return update.get("status") == "in_progress"


async def test_session_cancel_mid_tool_fails_the_call_and_answers_cancelled_with_nothing_after(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(SLOW, "--profile", "full-auto")
    session = (await client.new_session(workspace))["sessionId"]
    _, answer = client.start_request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    await client.wait_for(_in_progress)
    started = time.perf_counter()
    client.notify("session/cancel", {"sessionId": session})
    async with asyncio.timeout(5):
        reply = await answer
    elapsed = time.perf_counter() - started
    assert reply["result"] == {"stopReason": "cancelled"}
    assert elapsed < 2.0  # the 200 ms goal is measured by the benchmark, not here
    (shell,) = tool_updates(client.updates(session)).values()
    assert shell[-1]["status"] == "failed"
    assert "cancel" in shell[-1]["content"][0]["content"]["text"].lower()
    await client.request("session/list", {})  # a round trip: anything late would be in
    answered_at = client.lines.index(reply)
    late = [
        line for line in client.lines[answered_at + 1 :]
        if line.get("method") == "session/update"
    ]  # fmt: skip
    assert late == []


async def test_cancel_request_for_a_prompt_ends_its_run_and_answers_request_cancelled(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(SLOW, "--profile", "full-auto")
    session = (await client.new_session(workspace))["sessionId"]
    prompt_id, answer = client.start_request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    await client.wait_for(_in_progress)
    client.notify("$/cancel_request", {"requestId": prompt_id})
    async with asyncio.timeout(5):
        reply = await answer
    assert reply["error"]["code"] == JsonRpcCode.REQUEST_CANCELLED
    (shell,) = tool_updates(client.updates(session)).values()
    assert shell[-1]["status"] == "failed"


async def test_bad_lines_are_answered_or_skipped_and_the_agent_stays_up(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(scripted({"content": "still here"}))
    client.write(b"this is not json\n")
    client.write(b"[1, 2]\n")
    client.write(b'{"jsonrpc": "2.0", "id": 77, "params": ' + b"[" * 10000 + b"]" * 10000 + b"}\n")
    client.write(b'{"jsonrpc":"2.0","id":78,"method":"x","params":"' + b"a" * (40 << 20) + b'"}\n')
    client.write(b'{"jsonrpc": "2.0", "id": 79, "method": "no/such", "params": {}}\n')
    session = (await client.new_session(workspace))["sessionId"]
    reply = await client.prompt(session, "hello?")
    assert reply == {"stopReason": "end_turn"}
    errors = [line["error"]["code"] for line in client.lines if "error" in line]
    parse, invalid, unknown = (
        JsonRpcCode.PARSE_ERROR, JsonRpcCode.INVALID_REQUEST, JsonRpcCode.METHOD_NOT_FOUND,
    )  # fmt: skip
    assert errors == [parse, invalid, parse, parse, unknown]
    assert client.stdout_junk == []  # nothing but protocol on stdout


async def test_every_line_on_stdout_is_one_json_rpc_message(spawn: Spawn, workspace: Path) -> None:
    client = await spawn(scripted({"content": "x"}), "--log-level", "DEBUG")
    session = (await client.new_session(workspace))["sessionId"]
    await client.prompt(session, "hi")
    assert client.stdout_junk == []
    assert all(json.dumps(line) and line.get("jsonrpc") == "2.0" for line in client.lines)


async def test_a_request_before_initialize_is_an_invalid_request_never_resource_not_found(
    state_dir: Path, workspace: Path
) -> None:
    """ACP defines -32002 as "resource not found" (an unknown session): a request before
    ``initialize`` is refused as an invalid request instead, and the agent still serves."""
    client = await AcpClient(serve_command(scripted({"content": "hi"}), state_dir)).start()
    try:
        for method, params in (("session/new", {"cwd": str(workspace), "mcpServers": []}),
                               ("session/list", {}), ("no/such", {})):  # fmt: skip
            reply = await client.raw_request(method, params)
            assert reply["error"]["code"] == -32600, reply
            assert "initialize" in reply["error"]["message"]
        await client.initialize()
        assert "sessionId" in await client.new_session(workspace)
    finally:
        await client.close()
