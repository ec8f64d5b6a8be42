"""Edges of the wire through the real daemon: the daemon's own ``$/cancelRequest``, run/list
summaries and Lua's ``params: []``, a prompt that is not Unicode, and replies that reuse
the id of one of the client's own pending requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kit.models import DONE, HANG, HANG_TOOL
from kit.rawpeer import RawDaemon, body


@pytest.fixture
async def daemon(workspace: Path, state_dir: Path) -> AsyncIterator[RawDaemon]:
    started = await RawDaemon.start(workspace, state_dir)
    await started.call("register", "tools/register", {"tools": [HANG_TOOL]})
    yield started
    await started.kill()


async def _hanging(daemon: RawDaemon, msg_id: Any, run_id: str, prompt: str = "go") -> Any:
    """Start a run whose tool call is never answered; returns the daemon's tools/call."""
    daemon.send({"jsonrpc": "2.0", "id": msg_id, "method": "run/start",
                 "params": {"prompt": prompt, "runId": run_id, "model": HANG}})  # fmt: skip
    while True:
        message = await daemon.next()
        if message.get("method") == "tools/call":
            return message


async def test_the_daemons_cancel_of_its_tools_call_names_the_run_and_the_call(
    daemon: RawDaemon,
) -> None:
    tools_call = await _hanging(daemon, 3, "run-c")
    daemon.send({"jsonrpc": "2.0", "id": 4, "method": "run/cancel", "params": {"runId": "run-c"}})
    reply = await daemon.reply_to(3)  # its $/cancelRequest comes before it
    assert reply["result"]["status"] == "cancelled"
    cancels = [m["params"] for m in daemon.messages if m.get("method") == "$/cancelRequest"]
    assert cancels == [{"id": tools_call["id"], "runId": "run-c",
                        "callId": tools_call["params"]["callId"]}]  # fmt: skip


async def test_run_list_cuts_an_active_runs_prompt_and_takes_lua_empty_params(
    daemon: RawDaemon,
) -> None:
    prompt = "".join(chr(ord("a") + n % 26) for n in range(500))
    await _hanging(daemon, 3, "long", prompt)
    listed = await daemon.call(4, "run/list", {})
    from_lua = await daemon.call(5, "run/list", [])
    (summary,) = listed["result"]["runs"]
    assert summary["active"] is True
    assert summary["prompt"] == prompt[:200]
    assert from_lua["result"] == listed["result"]


async def test_a_prompt_with_a_lone_surrogate_is_refused_without_burning_its_run_id(
    daemon: RawDaemon,
) -> None:
    # A run that would start, but for its prompt: JSON escapes the lone surrogate.
    params = {"prompt": "bad \udc00 text", "runId": "s1", "model": DONE}
    daemon.send_body(body({"jsonrpc": "2.0", "id": 3, "method": "run/start", "params": params}))
    refused = await daemon.reply_to(3)
    assert refused["error"]["code"] == -32602
    again = await daemon.call(4, "run/start", {"prompt": "fine", "runId": "s1", "model": DONE})
    assert again["result"]["status"] == "completed"


async def test_a_reply_reusing_a_pending_request_id_is_dropped_and_the_daemon_goes_on(
    daemon: RawDaemon,
) -> None:
    since = len(daemon.messages)  # after initialize's reply, which had id 1 too
    await _hanging(daemon, 1, "pending")  # run/start id 1 stays pending
    for forged in (1, True, 1.0):
        daemon.send({"jsonrpc": "2.0", "id": forged, "result": {}})
    daemon.send({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "forged"}})
    listed = await daemon.call("after", "tools/list", {})
    assert "client/hang" in [t["name"] for t in listed["result"]["tools"]]
    daemon.send({"jsonrpc": "2.0", "id": "cancel", "method": "run/cancel",
                 "params": {"runId": "pending"}})  # fmt: skip
    # Any answer to a forged reply was written before the "after" reply; the real one
    # comes once the run has ended.
    while not any(m.get("id") == 1 and "result" in m for m in daemon.messages[since:]):
        await daemon.next()
    answers = [m for m in daemon.messages[since:] if "method" not in m and m.get("id") == 1]
    assert [json.dumps(m["id"]) for m in answers] == ["1"]  # one answer, the real one
    assert answers[0]["result"]["status"] == "cancelled"


async def test_frames_that_mention_exit_are_requests_like_any_other(daemon: RawDaemon) -> None:
    # The read loop once peeked for the bytes "exit" and stalled on them; only the
    # dispatcher decides what exit is: a notification whose method is "exit".
    daemon.send({"jsonrpc": "2.0", "id": "e1", "method": "tools/list",
                 "params": {"note": "exit"}})  # fmt: skip
    daemon.send({"jsonrpc": "2.0", "id": "e2", "method": "run/start", "params": {
        "prompt": "exit", "runId": "exit", "model": DONE}})  # fmt: skip
    replies: dict[Any, dict[str, Any]] = {}
    while len(replies) < 2:
        message = await daemon.next()
        if "method" not in message:
            replies[message["id"]] = message
    assert "result" in replies["e1"], replies
    assert replies["e2"]["result"]["status"] == "completed"
    got = await daemon.call("exit", "run/get", {"runId": "exit"})  # an id that reads "exit"
    assert got["result"]["runId"] == "exit"
    assert daemon.process.returncode is None  # still serving
