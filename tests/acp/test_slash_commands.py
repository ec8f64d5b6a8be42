"""ACP's slash commands over the real ``cleveragents serve --protocol acp``: advertised
with ``available_commands_update`` after ``session/new`` and ``session/load``; ``/diff``
shows what the session changed; ``/undo`` puts back the last turn's files, refusing a
later edit of the user's (nothing changed) unless forced, and names the ``/restore`` that
undoes it; none of them reaches the model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleveragents.acp._commands import MAX_PATCH_CHARS, fenced, parse
from cleveragents.transcripts import TranscriptStore
from kit.acp import AcpClient, Spawn, tool_updates
from kit.fake_openai import openai_error
from kit.loopback import LoopbackServer, Reply, data, sse_reply
from kit.models import call, script_file, scripted

WRITE = scripted(
    {"content": "Writing.", "toolCalls": [
        call("builtin/file-write", path="notes.md", content="- one\n- two\n"),
        call("builtin/file-edit", path="src/greet.py", old_text='"hi"', new_text='"hello"')]},
    {"content": "Done."},
)  # fmt: skip


async def allow(method: str, params: Any) -> Any:
    return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}


def replies(client: AcpClient, session: str) -> list[str]:
    return [u["content"]["text"] for u in client.updates(session)
            if u["sessionUpdate"] == "agent_message_chunk"]  # fmt: skip


async def commands_of(client: AcpClient, session: str) -> list[dict[str, Any]]:
    found = await client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["sessionId"] == session
            and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
        )
    )
    commands: list[dict[str, Any]] = found["params"]["update"]["availableCommands"]
    return commands


async def test_the_commands_are_advertised_after_new_and_load(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(WRITE)
    reply = await client.raw_request("session/new", {"cwd": str(workspace), "mcpServers": []})
    session = reply["result"]["sessionId"]
    commands = await commands_of(client, session)
    assert [c["name"] for c in commands] == ["diff", "undo", "restore"]
    assert all(c["description"] for c in commands)
    assert commands[1]["input"]["hint"].startswith("force")
    # After the answer: the client knew the session id when the update came.
    at = client.lines.index(reply)
    update = next(i for i, m in enumerate(client.lines) if m.get("method") == "session/update")
    assert update > at
    await client.close()

    again = await spawn(WRITE)
    await again.request("session/load", {"sessionId": session, "cwd": str(workspace),
                                         "mcpServers": []})  # fmt: skip
    assert [c["name"] for c in await commands_of(again, session)] == ["diff", "undo", "restore"]


async def test_diff_then_undo_refused_forced_and_undone_by_restore(
    spawn: Spawn, workspace: Path, state_dir: Path
) -> None:
    client = await spawn(WRITE)
    client.on_request = allow
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "write notes") == {"stopReason": "end_turn"}
    greet = workspace / "src" / "greet.py"
    assert greet.read_text() == 'def greet():\n    return "hello"\n'
    runs_before = len(TranscriptStore(state_dir).summaries())

    assert await client.prompt(session, "/diff") == {"stopReason": "end_turn"}
    shown = replies(client, session)[-1]
    assert " notes.md     | 2 ++ (new)" in shown
    assert " src/greet.py | 2 +-" in shown
    assert "```diff\ndiff --git a/notes.md b/notes.md\n" in shown
    assert '-    return "hi"\n+    return "hello"\n' in shown

    greet.write_text("the user's own edit\n")
    await client.prompt(session, "/undo")
    refused = replies(client, session)[-1]
    assert refused.startswith("Nothing was changed: 1 file changed since the last checkpoint")
    assert "`src/greet.py`: changed after checkpoint" in refused
    assert (workspace / "notes.md").exists()
    assert greet.read_text() == "the user's own edit\n"

    await client.prompt(session, "/undo force")
    done = replies(client, session)[-1]
    assert not (workspace / "notes.md").exists()
    assert greet.read_text() == 'def greet():\n    return "hi"\n'
    [checkpoint] = re.findall(r"To undo this: `/restore ([0-9a-f]{16})`", done)

    await client.prompt(session, f"/restore {checkpoint}")
    assert replies(client, session)[-1].startswith("Put back 2 files of checkpoint")
    assert greet.read_text() == "the user's own edit\n"
    assert (workspace / "notes.md").read_text() == "- one\n- two\n"

    # No command reached the model: no run, no tool call after the first turn.
    assert len(TranscriptStore(state_dir).summaries()) == runs_before
    assert len(tool_updates(client.updates(session))) == 2
    await client.prompt(session, "/undo")
    assert replies(client, session)[-1] == "/undo: no turn of this session to undo"


def write_call(path: str) -> Reply:
    """A streamed chat-completions answer calling ``builtin/file-write`` for ``path``."""
    arguments = json.dumps({"path": path, "content": f"{path}\n"})
    call = {"index": 0, "id": f"call_{path}", "type": "function",
            "function": {"name": "builtin__file-write", "arguments": arguments}}  # fmt: skip
    return sse_reply(chunk({"role": "assistant", "tool_calls": [call]}, "tool_calls"), DONE)


def text(words: str) -> Reply:
    return sse_reply(chunk({"role": "assistant", "content": words}, "stop"), DONE)


def chunk(delta: dict[str, Any], finish: str) -> str:
    return data({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip


DONE = "data: [DONE]\n\n"


async def test_a_failed_turn_is_the_one_undo_puts_back_and_the_next_turn_skips_it(
    spawn: Spawn, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    with LoopbackServer() as server:
        server.queue(
            write_call("first.md"), text("Wrote the first."),
            write_call("second.md"), openai_error(400, "the model broke", param=None),
            text("Going on."),
        )  # fmt: skip
        model = {"provider": "openai", "model": "m", "baseUrl": f"{server.base_url}/v1",
                 "maxRetries": 0}  # fmt: skip
        client = await spawn(model)
        client.on_request = allow
        session = (await client.new_session(workspace))["sessionId"]
        assert await client.prompt(session, "the first") == {"stopReason": "end_turn"}
        params = {"sessionId": session, "prompt": [{"type": "text", "text": "the second"}]}
        failed = await client.raw_request("session/prompt", params, timeout=15)
        assert "the model broke" in failed["error"]["message"]
        assert (workspace / "second.md").exists()  # written before the model failed

        await client.prompt(session, "/undo")
        assert not (workspace / "second.md").exists()  # the failed turn's, not the first's
        assert (workspace / "first.md").read_text() == "first.md\n"

        assert await client.prompt(session, "go on") == {"stopReason": "end_turn"}
        sent = json.dumps(server.requests[-1].body["messages"])
        assert "the first" in sent
        assert "the second" not in sent  # a failed turn is not gone on from
        await client.prompt(session, "/undo")  # the turn that went on
        await client.prompt(session, "/undo")
        assert not (workspace / "first.md").exists()


async def test_serve_no_checkpoints_takes_none_so_diff_shows_nothing(
    spawn: Spawn, workspace: Path, state_dir: Path
) -> None:
    client = await spawn(WRITE, "--no-checkpoints")
    client.on_request = allow
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "write notes") == {"stopReason": "end_turn"}
    assert (workspace / "notes.md").exists()  # the run wrote...
    assert not (state_dir / "checkpoints").exists()  # ...and no store was even opened
    await client.prompt(session, "/diff")
    assert replies(client, session)[-1] == "This session changed no files."


async def test_a_session_that_changed_nothing_says_so_and_bad_arguments_are_replies(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(scripted({"content": "Just talking."}))
    session = (await client.new_session(workspace))["sessionId"]
    await client.prompt(session, "hello")
    await client.prompt(session, "/diff")
    assert replies(client, session)[-1] == "This session changed no files."
    await client.prompt(session, "/undo everything")
    assert replies(client, session)[-1].startswith("/undo takes nothing, or `force`")
    await client.prompt(session, "/restore nothex")
    assert "nothex" in replies(client, session)[-1]


@given(st.text(max_size=200))
def test_any_prompt_text_parses_to_a_known_command_or_to_none(text: str) -> None:
    parsed = parse(text)
    assert parsed is None or parsed[0] in {"diff", "undo", "restore"}
    if parsed is not None:
        assert text.strip().startswith("/" + parsed[0])


def test_only_the_agent_s_commands_are_taken_and_a_fence_holds_any_patch() -> None:
    assert parse("/diff") == ("diff", "")
    assert parse("  /undo force\n") == ("undo", "force")
    assert parse("/restore 0123456789abcdef") == ("restore", "0123456789abcdef")
    assert parse("/explain this") is None  # goes to the model as typed
    assert parse("please /diff") is None
    patch = "+```\n+````\n"
    block = fenced(patch, "diff")
    assert block.startswith("`````diff\n")
    assert block.endswith("\n`````")


async def test_a_huge_patch_is_cut_in_the_reply_and_says_so(
    spawn: Spawn, workspace: Path, tmp_path: Path
) -> None:
    big = "".join(f"line {n}\n" for n in range(40_000))  # ~430 KB of patch
    client = await spawn(script_file(tmp_path,
        {"content": "Writing.", "toolCalls": [call("builtin/file-write", path="big.txt", content=big)]},
        {"content": "Done."}))  # fmt: skip
    client.on_request = allow
    session = (await client.new_session(workspace))["sessionId"]
    await client.prompt(session, "write it")
    await client.prompt(session, "/diff")
    reply = replies(client, session)[-1]
    assert " big.txt | 40000 " in reply
    assert len(reply) < MAX_PATCH_CHARS + 2_000
    assert reply.endswith("shows each turn's whole)")
    assert "+line 39999" not in reply
