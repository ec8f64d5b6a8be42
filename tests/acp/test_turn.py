"""A prompt turn over the real ``cleveragents serve --protocol acp``: text chunks, tool
calls from pending to a final status, diffs, permissions and stop reasons."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cleveragents.acp._agent import RESOURCE_NOT_FOUND
from cleveragents.llm.errors import ModelConfigError
from cleveragents.tool import JsonRpcCode
from kit.acp import Spawn, tool_updates
from kit.models import call, scripted

READ_THEN_EDIT = scripted(
    {"content": "Reading.", "toolCalls": [call("builtin/file-read", path="src/greet.py")]},
    {"content": "Editing.", "toolCalls": [
        call("builtin/file-edit", path="src/greet.py", old_text='"hi"', new_text='"hello"')
    ]},
    {"content": "Done."},
)  # fmt: skip


def answering(outcome: str, asked: list[Any]) -> Any:
    async def handler(method: str, params: Any) -> Any:
        assert method == "session/request_permission"
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": outcome}}

    return handler


async def test_initialize_answers_version_capabilities_and_agent_info(spawn: Spawn) -> None:
    client = await spawn(scripted({"content": "hi"}))
    again = await client.raw_request("initialize", {"protocolVersion": 1})
    assert again["error"]["code"] == JsonRpcCode.INVALID_REQUEST  # one initialize per connection
    first = client.lines[0]["result"]
    assert first["protocolVersion"] == 1
    assert first["agentInfo"]["name"] == "cleveragents"
    caps = first["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"]["embeddedContext"] is True
    assert caps["mcpCapabilities"]["http"] is True
    assert set(caps["sessionCapabilities"]) == {"list", "resume", "close"}
    assert first["authMethods"] == []


async def test_a_turn_streams_text_and_every_tool_call_reaches_a_final_status(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(READ_THEN_EDIT)
    asked: list[Any] = []
    client.on_request = answering("allow_once", asked)
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "make it say hello") == {"stopReason": "end_turn"}

    updates = client.updates(session)
    texts = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert texts == ["Reading.", "Editing.", "Done."]
    message_ids = [u["messageId"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert len(set(message_ids)) == 3
    calls = list(tool_updates(updates).values())
    read, edit = calls
    assert [u.get("status") for u in read] == ["pending", "in_progress", "completed"]
    assert read[0]["title"] == "Read src/greet.py"
    assert read[0]["kind"] == "read"
    assert read[0]["locations"] == [{"path": str(workspace / "src" / "greet.py")}]
    assert read[0]["rawInput"] == {"path": "src/greet.py"}
    assert read[-1]["content"][0]["content"]["text"] == 'def greet():\n    return "hi"\n'
    assert read[-1]["rawOutput"]["content"] == 'def greet():\n    return "hi"\n'

    assert [u.get("status") for u in edit] == ["pending", "in_progress", "completed"]
    assert edit[0]["title"] == "Edit src/greet.py"
    assert edit[0]["kind"] == "edit"
    assert edit[-1]["content"] == [{
        "type": "diff", "path": str(workspace / "src" / "greet.py"),
        "oldText": 'def greet():\n    return "hi"\n',
        "newText": 'def greet():\n    return "hello"\n',
    }]  # fmt: skip
    assert (workspace / "src" / "greet.py").read_text() == 'def greet():\n    return "hello"\n'


async def test_the_pending_tool_call_comes_before_the_permission_prompt(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(READ_THEN_EDIT)
    asked: list[Any] = []
    client.on_request = answering("allow_once", asked)
    session = (await client.new_session(workspace))["sessionId"]
    await client.prompt(session, "go")
    assert len(asked) == 1  # supervised: the read is free, the edit is asked
    call_id = asked[0]["toolCall"]["toolCallId"]
    assert asked[0]["toolCall"]["title"] == "Edit src/greet.py"
    assert [o["kind"] for o in asked[0]["options"]] == [
        "allow_once", "allow_always", "reject_once", "reject_always"
    ]  # fmt: skip
    order = [
        ("request" if line.get("method") == "session/request_permission" else
         line["params"]["update"].get("status"))
        for line in client.lines
        if line.get("method") == "session/request_permission"
        or (line.get("method") == "session/update"
            and line["params"]["update"].get("toolCallId") == call_id)
    ]  # fmt: skip
    assert order == ["pending", "request", "in_progress", "completed"]


async def test_a_rejected_call_fails_saying_the_user_declined_and_the_turn_goes_on(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(READ_THEN_EDIT)
    client.on_request = answering("reject_once", [])
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "go") == {"stopReason": "end_turn"}
    edit = list(tool_updates(client.updates(session)).values())[1]
    assert edit[-1]["status"] == "failed"
    assert "declined" in edit[-1]["content"][0]["content"]["text"]
    assert "hi" in (workspace / "src" / "greet.py").read_text()


async def test_an_always_answer_is_remembered_for_the_session(
    spawn: Spawn, workspace: Path
) -> None:
    model = scripted(
        {"toolCalls": [call("builtin/file-write", path="a.txt", content="a")]},
        {"content": "ok"},
    )
    client = await spawn(model)
    asked: list[Any] = []
    client.on_request = answering("allow_always", asked)
    session = (await client.new_session(workspace))["sessionId"]
    await client.prompt(session, "one")
    await client.prompt(session, "two")
    assert len(asked) == 1
    writes = [u for u in client.updates(session) if u.get("status") == "completed"]
    assert len(writes) == 2
    assert writes[0]["content"][0]["oldText"] is None  # a new file
    assert writes[0]["content"][0]["newText"] == "a"


async def test_a_cancelled_permission_prompt_ends_the_turn_as_cancelled(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(READ_THEN_EDIT)

    async def cancelled(method: str, params: Any) -> Any:
        return {"outcome": {"outcome": "cancelled"}}

    client.on_request = cancelled
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "go") == {"stopReason": "cancelled"}
    edit = list(tool_updates(client.updates(session)).values())[1]
    assert edit[-1]["status"] == "failed"


async def test_titles_and_kinds_name_what_each_tool_works_on(spawn: Spawn, workspace: Path) -> None:
    model = scripted(
        {"toolCalls": [
            call("builtin/file-list", pattern="**/*.py"),
            call("builtin/file-search", pattern="TODO"),
            call("builtin/shell", command="echo hi"),
            call("builtin/file-write", path="new.txt", content="x"),
        ]},
        {"content": "ok"},
    )  # fmt: skip
    client = await spawn(model, "--profile", "full-auto")
    session = (await client.new_session(workspace))["sessionId"]
    await client.prompt(session, "go")
    calls = list(tool_updates(client.updates(session)).values())
    assert [(c[0]["title"], c[0]["kind"]) for c in calls] == [
        ("List **/*.py", "search"), ("Search for TODO", "search"),
        ("Run `echo hi`", "execute"), ("Write new.txt", "edit"),
    ]  # fmt: skip
    assert all(c[-1]["status"] in ("completed", "failed") for c in calls)
    shell = calls[2][-1]
    assert shell["status"] == "completed"
    assert "hi" in shell["content"][0]["content"]["text"]


async def test_a_run_at_its_limit_answers_max_turn_requests(spawn: Spawn, workspace: Path) -> None:
    client = await spawn(scripted({"toolCalls": [call("builtin/file-list")]}))
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "loop", timeout=30) == {"stopReason": "max_turn_requests"}


async def test_resource_and_link_blocks_reach_the_model(spawn: Spawn, workspace: Path) -> None:
    client = await spawn(scripted({"content": "seen"}))
    session = (await client.new_session(workspace))["sessionId"]
    uri = (workspace / "src" / "greet.py").as_uri()
    prompt = [
        {"type": "text", "text": "look"},
        {"type": "resource_link", "uri": uri, "name": "greet.py"},
        {"type": "resource", "resource": {"uri": "file:///x.txt", "text": "embedded"}},
    ]
    reply = await client.request("session/prompt", {"sessionId": session, "prompt": prompt})
    assert reply == {"stopReason": "end_turn"}
    bad = await client.raw_request(
        "session/prompt",
        {"sessionId": session, "prompt": [{"type": "image", "data": "", "mimeType": "x"}]},
    )
    assert bad["error"]["code"] == JsonRpcCode.INVALID_PARAMS


async def test_a_run_that_cannot_start_is_an_error_reply(spawn: Spawn, workspace: Path) -> None:
    client = await spawn("scripted:/nonexistent/turns.json")
    session = (await client.new_session(workspace))["sessionId"]
    reply = await client.raw_request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}
    )
    assert reply["error"]["code"] == ModelConfigError.code
    unknown = await client.raw_request("session/prompt", {"sessionId": "nope", "prompt": []})
    assert unknown["error"]["code"] == RESOURCE_NOT_FOUND
    await asyncio.sleep(0)


async def test_reasoning_streams_as_thought_chunks_before_the_text_it_preceded(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(scripted({"reasoning": "Greet them.", "content": "Hello."}))
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "say hi") == {"stopReason": "end_turn"}
    said = [
        (u["sessionUpdate"], u["content"]["text"])
        for u in client.updates(session)
        if u["sessionUpdate"] in ("agent_thought_chunk", "agent_message_chunk")
    ]
    assert said == [("agent_thought_chunk", "Greet them."), ("agent_message_chunk", "Hello.")]


async def test_context_use_reaches_the_editor_as_usage_update_and_a_compaction_as_a_line(
    spawn: Spawn, workspace: Path
) -> None:
    big = "x" * 8_000
    (workspace / "big.txt").write_text(big)
    turns = [{"toolCalls": [call("builtin/file-read", path="big.txt")]} for _ in range(6)]
    model = {"provider": "scripted", "contextWindow": 6_000,
             "script": [*turns, {"content": "Done."}]}  # fmt: skip
    client = await spawn(model)
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "read it") == {"stopReason": "end_turn"}
    updates = client.updates(session)
    usage = [u for u in updates if u["sessionUpdate"] == "usage_update"]
    assert len(usage) == 7  # one per iteration
    used = [u["used"] for u in usage]
    assert all(u["size"] == 6_000 for u in usage)
    assert used[0] < used[1] < used[2]  # each file read adds to the context...
    assert max(used) <= 6_000  # ...and no request sent passed the window: it was compacted
    lines = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert any("[context compacted: older tool outputs cut" in line for line in lines)
