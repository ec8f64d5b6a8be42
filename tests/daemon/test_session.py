"""The daemon end to end: lifecycle, tools, runs, notifications, cancel, transcripts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from cleveragents.protocol import methods as m
from cleveragents.tool import ToolCancelledError, ToolError, ToolNotFoundError, ToolTimeoutError
from kit.lsp import Session
from kit.models import call, scripted

ECHO_TOOL = {
    "name": "client/echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


async def test_initialize_advertises_protocol_methods_and_builtin_tools(session: Session) -> None:
    caps = session.capabilities
    assert caps["protocolVersion"] == 1
    assert set(caps["methods"]) >= {
        "tools/register", "tools/unregister", "tools/list", "run/start", "run/cancel",
        "run/list", "run/get",
    }  # fmt: skip
    assert "builtin/file-read" in caps["builtinTools"]
    assert "builtin/shell" in caps["builtinTools"]


async def test_client_tools_register_list_and_unregister(session: Session) -> None:
    registered = await session.request(m.TOOLS_REGISTER, {"tools": [ECHO_TOOL]})
    assert registered == {"registered": ["client/echo"]}
    tools = (await session.request(m.TOOLS_LIST, {}))["tools"]
    names = [t["name"] for t in tools]
    assert names == sorted(names)
    echo = next(t for t in tools if t["name"] == "client/echo")
    assert echo["source"] == "client"
    assert echo["inputSchema"] == ECHO_TOOL["inputSchema"]
    assert next(t for t in tools if t["name"] == "builtin/file-read")["source"] == "builtin"
    assert await session.request(m.TOOLS_UNREGISTER, {"names": ["client/echo"]}) == {
        "unregistered": ["client/echo"]
    }
    names = [t["name"] for t in (await session.request(m.TOOLS_LIST, {}))["tools"]]
    assert "client/echo" not in names


async def test_registering_a_duplicate_needs_replace(session: Session) -> None:
    await session.request(m.TOOLS_REGISTER, {"tools": [ECHO_TOOL]})
    with pytest.raises(JsonRpcException) as info:
        await session.request(m.TOOLS_REGISTER, {"tools": [ECHO_TOOL]})
    assert info.value.code == -32013
    assert "client/echo" in info.value.message
    again = await session.request(m.TOOLS_REGISTER, {"tools": [ECHO_TOOL], "replace": True})
    assert again == {"registered": ["client/echo"]}


@pytest.mark.parametrize(
    ("name", "code"),
    [("builtin/mine", -32011), ("mcp:server/x", -32011), ("bad name", -32014)],
)
async def test_reserved_or_invalid_tool_names_are_refused(
    session: Session, name: str, code: int
) -> None:
    with pytest.raises(JsonRpcException) as info:
        await session.request(m.TOOLS_REGISTER, {"tools": [{**ECHO_TOOL, "name": name}]})
    assert info.value.code == code


async def test_a_run_mixing_a_builtin_and_a_client_tool(session: Session) -> None:
    await session.request(m.TOOLS_REGISTER, {"tools": [ECHO_TOOL]})
    model = scripted(
        {"content": "looking", "toolCalls": [
            call("builtin/file-read", path="hello.txt"),
            call("client/echo", text="hi", sandbox_root="/"),
        ]},
        {"content": "all done"},
    )  # fmt: skip
    result = await session.request(
        m.RUN_START,
        {"prompt": "go", "model": model, "runId": "mixed", "resourceBindings": {"db": "main"}},
    )
    assert result["status"] == "completed"
    assert result["content"] == "all done"
    assert result["iterations"] == 2
    read, echo = result["toolCallHistory"]
    assert read["success"]
    assert "hello world" in str(read["output"])
    assert echo == {**echo, "toolName": "client/echo", "success": True, "iteration": 1,
                    "output": "echo {'text': 'hi', 'sandbox_root': '/'}"}  # fmt: skip
    (params,) = session.tool_calls
    assert params["sandboxRoot"] == str(session.workspace)
    assert params["arguments"] == {"text": "hi", "sandbox_root": "/"}  # exactly what the model sent
    assert params["resourceBindings"] == {"db": "main"}
    assert (params["runId"], params["iteration"], params["name"]) == ("mixed", 1, "client/echo")
    assert params["callId"] == echo["callId"]


async def test_notifications_come_in_order_with_gap_free_seq(session: Session) -> None:
    model = scripted(
        {"content": "step", "toolCalls": [call("builtin/file-list")]}, {"content": "end"}
    )
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model, "runId": "order"})
    events = session.for_run("order")
    assert [p["seq"] for _, p in events] == list(range(1, len(events) + 1))
    assert [method for method, _ in events] == [
        "run/started", "run/messageDelta", "run/toolCallStarted", "run/toolCall",
        "run/iteration", "run/messageDelta", "run/iteration", "run/finished",
    ]  # fmt: skip
    started = events[0][1]
    assert started["sandboxRoot"] == str(session.workspace)
    assert started["maxIterations"] == 25
    assert "builtin/file-list" in started["tools"]
    assert events[-1][1]["result"] == result
    iteration = events[4][1]
    assert (iteration["iteration"], iteration["content"], iteration["toolCallCount"]) == (
        1,
        "step",
        1,
    )


async def test_reasoning_and_cache_usage_reach_the_wire_in_order(session: Session) -> None:
    usage = {"inputTokens": 50, "outputTokens": 9, "cacheReadTokens": 40, "reasoningTokens": 4}
    model = scripted(
        {"reasoning": "List first.", "content": "step", "usage": usage,
         "toolCalls": [call("builtin/file-list")]},
        {"reasoning": "Now answer.", "content": "end", "usage": usage},
    )  # fmt: skip
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model, "runId": "why"})
    events = session.for_run("why")
    assert [p["seq"] for _, p in events] == list(range(1, len(events) + 1))
    assert [method for method, _ in events] == [
        "run/started", "run/reasoningDelta", "run/messageDelta", "run/toolCallStarted",
        "run/toolCall", "run/iteration", "run/reasoningDelta", "run/messageDelta",
        "run/iteration", "run/finished",
    ]  # fmt: skip
    assert events[1][1] == {"runId": "why", "seq": 2, "iteration": 1, "text": "List first."}
    assert events[5][1]["usage"] == usage
    assert result["usage"] == {
        "inputTokens": 100, "outputTokens": 18, "cacheReadTokens": 80, "reasoningTokens": 8,
    }  # fmt: skip
    assert result["content"] == "end"


async def test_the_allow_list_limits_what_a_run_sees(session: Session) -> None:
    model = scripted({"toolCalls": [call("builtin/file-write", path="x.txt", content="x")]},
                     {"content": "end"})  # fmt: skip
    result = await session.request(
        m.RUN_START, {"prompt": "go", "model": model, "runId": "allow",
                      "tools": ["builtin/file-read"]},
    )  # fmt: skip
    assert session.for_run("allow")[0][1]["tools"] == ["builtin/file-read"]
    (record,) = result["toolCallHistory"]
    assert (record["success"], record["errorCode"]) == (False, ToolNotFoundError.code)
    assert "builtin/file-write" in record["error"]  # names the tool
    assert not (session.workspace / "x.txt").exists()


async def test_the_iteration_limit_ends_the_run_with_partial_content(session: Session) -> None:
    model = scripted({"content": "more", "toolCalls": [call("builtin/file-list")]})
    result = await session.request(
        m.RUN_START, {"prompt": "go", "model": model, "maxIterations": 2}
    )
    assert (result["status"], result["terminatedByLimit"], result["iterations"]) == (
        "limit",
        True,
        2,
    )
    assert result["content"] == "more"
    assert len(result["toolCallHistory"]) == 2


async def test_run_scoped_tools_are_visible_to_that_run_only(session: Session) -> None:
    gate = asyncio.Event()

    async def slow(params: dict[str, Any]) -> Any:
        await gate.wait()
        return {"output": "released"}

    await session.request(m.TOOLS_REGISTER, {"tools": [{**ECHO_TOOL, "name": "client/gate"}]})
    session.tool_handlers["client/gate"] = slow
    model = scripted({"toolCalls": [call("client/gate")]}, {"toolCalls": [call("run/only")]},
                     {"content": "end"})  # fmt: skip
    pending = session.start(model=model, runId="scoped")
    await session.wait_for(lambda method, p: method == m.RUN_TOOL_CALL_STARTED)
    await session.request(
        m.TOOLS_REGISTER, {"runId": "scoped", "tools": [{**ECHO_TOOL, "name": "run/only"}]}
    )
    run_tools = [
        t["name"] for t in (await session.request(m.TOOLS_LIST, {"runId": "scoped"}))["tools"]
    ]
    daemon_tools = [t["name"] for t in (await session.request(m.TOOLS_LIST, {}))["tools"]]
    assert "run/only" in run_tools
    assert "run/only" not in daemon_tools
    gate.set()
    result = await pending
    assert [r["success"] for r in result["toolCallHistory"]] == [True, True]
    with pytest.raises(JsonRpcException) as info:  # the run is over: its layer is gone
        await session.request(m.TOOLS_LIST, {"runId": "scoped"})
    assert info.value.code == -32022


async def test_a_client_tool_error_reply_gives_a_failed_record(session: Session) -> None:
    from kit.lsp import DeliberateError

    async def fail(params: dict[str, Any]) -> Any:
        raise DeliberateError("editor exploded", -32050)

    async def is_error(params: dict[str, Any]) -> Any:
        return {"output": {"reason": "no such file"}, "isError": True}

    await session.request(m.TOOLS_REGISTER, {"tools": [
        {**ECHO_TOOL, "name": "client/fail"}, {**ECHO_TOOL, "name": "client/is-error"}]})  # fmt: skip
    session.tool_handlers.update({"client/fail": fail, "client/is-error": is_error})
    model = scripted(
        {"toolCalls": [call("client/fail"), call("client/is-error")]}, {"content": "ok"}
    )
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model})
    failed, flagged = result["toolCallHistory"]
    assert (failed["success"], failed["errorCode"]) == (False, ToolError.code)
    assert "editor exploded" in failed["error"]  # the client's own words reach the model
    assert (flagged["success"], flagged["errorCode"]) == (False, ToolError.code)
    assert flagged["error"] == '{"reason": "no such file"}'  # its output, as the model reads it
    assert result["status"] == "completed"


async def test_a_client_tool_timeout_gives_a_failed_record_and_cancels_the_request(
    session: Session,
) -> None:
    async def hang(params: dict[str, Any]) -> Any:
        await asyncio.sleep(30)

    await session.request(m.TOOLS_REGISTER, {"tools": [
        {**ECHO_TOOL, "name": "client/hang", "timeoutMs": 100}]})  # fmt: skip
    session.tool_handlers["client/hang"] = hang
    model = scripted({"toolCalls": [call("client/hang")]}, {"content": "ok"})
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model})
    (record,) = result["toolCallHistory"]
    assert (record["success"], record["errorCode"]) == (False, ToolTimeoutError.code)


async def test_run_cancel_while_a_client_tool_is_pending(session: Session) -> None:
    cancelled = asyncio.Event()
    running = asyncio.Event()

    async def hang(params: dict[str, Any]) -> Any:
        running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()  # the daemon sent $/cancelRequest for tools/call
            raise

    await session.request(m.TOOLS_REGISTER, {"tools": [{**ECHO_TOOL, "name": "client/hang"}]})
    session.tool_handlers["client/hang"] = hang
    pending = session.start(model=scripted({"toolCalls": [call("client/hang")]}), runId="c1")
    async with asyncio.timeout(10):
        await running.wait()  # cancel once the tool really runs, so its cancel is seen
    assert await session.request(m.RUN_CANCEL, {"runId": "c1"}) == {}
    async with asyncio.timeout(5):
        result = await pending
    assert result["status"] == "cancelled"
    (record,) = result["toolCallHistory"]
    assert (record["success"], record["errorCode"]) == (False, ToolCancelledError.code)
    async with asyncio.timeout(5):
        await cancelled.wait()
    events = session.for_run("c1")
    assert events[-1][0] == m.RUN_FINISHED


async def test_cancel_request_answers_run_start_with_32800(session: Session) -> None:
    async def hang(params: dict[str, Any]) -> Any:
        await asyncio.sleep(30)

    await session.request(m.TOOLS_REGISTER, {"tools": [{**ECHO_TOOL, "name": "client/hang"}]})
    session.tool_handlers["client/hang"] = hang
    protocol = session.client.protocol
    reply = asyncio.wrap_future(protocol.send_request(
        m.RUN_START, {"prompt": "go", "model": scripted({"toolCalls": [call("client/hang")]}),
                      "runId": "c2"}, msg_id="start-c2"))  # fmt: skip
    await session.wait_for(lambda method, p: method == m.RUN_TOOL_CALL_STARTED)
    protocol.notify("$/cancelRequest", lsp.CancelParams(id="start-c2"))
    with pytest.raises(JsonRpcException) as info:
        async with asyncio.timeout(5):
            await reply
    assert info.value.code == -32800
    finished = session.for_run("c2")[-1]
    assert finished[0] == m.RUN_FINISHED
    assert finished[1]["result"]["status"] == "cancelled"


async def test_run_list_and_get_cover_active_and_finished_runs(session: Session) -> None:
    done = await session.request(m.RUN_START, {"prompt": "first", "model": scripted({"content": "a"}),
                                               "runId": "done-1"})  # fmt: skip
    assert await session.request(m.RUN_GET, {"runId": "done-1"}) == done
    gate = asyncio.Event()

    async def wait(params: dict[str, Any]) -> Any:
        await gate.wait()
        return {"output": 1}

    await session.request(m.TOOLS_REGISTER, {"tools": [{**ECHO_TOOL, "name": "client/wait"}]})
    session.tool_handlers["client/wait"] = wait
    pending = session.start("second", model=scripted({"toolCalls": [call("client/wait")]},
                                                     {"content": "b"}), runId="live-1")  # fmt: skip
    await session.wait_for(lambda method, p: method == m.RUN_TOOL_CALL_STARTED)
    runs = {r["runId"]: r for r in (await session.request(m.RUN_LIST, {}))["runs"]}
    assert runs["live-1"]["active"] is True
    assert runs["live-1"]["status"] == "running"
    assert runs["done-1"] == {**runs["done-1"], "active": False, "status": "completed",
                              "prompt": "first", "iterations": 1}  # fmt: skip
    waiting = asyncio.ensure_future(session.request(m.RUN_GET, {"runId": "live-1"}))
    gate.set()
    finished = await pending
    assert await waiting == finished  # run/get on an active run answers when it ends
    with pytest.raises(JsonRpcException) as info:
        await session.request(m.RUN_GET, {"runId": "nope"})
    assert info.value.code == -32022


async def test_twenty_concurrent_runs_do_not_cross_talk(session: Session) -> None:
    async def echo(params: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return {"output": params["runId"]}

    await session.request(m.TOOLS_REGISTER, {"tools": [ECHO_TOOL]})
    session.tool_handlers["client/echo"] = echo
    futures = [
        session.start(f"run {i}", runId=f"many-{i}", model=scripted(
            {"content": f"r{i}", "toolCalls": [call("client/echo"), call("builtin/file-list")]},
            {"content": f"done {i}"}))
        for i in range(20)
    ]  # fmt: skip
    async with asyncio.timeout(30):
        results = await asyncio.gather(*futures)
    for i, result in enumerate(results):
        assert result["runId"] == f"many-{i}"
        assert result["content"] == f"done {i}"
        assert result["toolCallHistory"][0]["output"] == f"many-{i}"
        events = session.for_run(f"many-{i}")
        assert [p["seq"] for _, p in events] == list(range(1, len(events) + 1))
        assert events[-1][0] == m.RUN_FINISHED
    assert (await session.request(m.RUN_LIST, {}))["runs"][0]["active"] is False


async def test_work_done_progress_begins_reports_and_ends(session: Session) -> None:
    session.client.progress_reports["tok-1"] = []
    model = scripted({"toolCalls": [call("builtin/file-list")]}, {"content": "end"})
    # $/progress end is written before the run/start reply, and read in wire order.
    await session.request(m.RUN_START, {"prompt": "go", "model": model, "workDoneToken": "tok-1"})
    kinds = [r.kind for r in session.client.progress_reports["tok-1"]]
    assert kinds == ["begin", "report", "report", "end"]


async def test_the_progress_cancel_button_cancels_the_run(session: Session) -> None:
    async def hang(params: dict[str, Any]) -> Any:
        await asyncio.sleep(30)

    await session.request(m.TOOLS_REGISTER, {"tools": [{**ECHO_TOOL, "name": "client/hang"}]})
    session.tool_handlers["client/hang"] = hang
    session.client.progress_reports["tok-2"] = []
    pending = session.start(
        model=scripted({"toolCalls": [call("client/hang")]}), workDoneToken="tok-2"
    )
    await session.wait_for(lambda method, p: method == m.RUN_TOOL_CALL_STARTED)
    session.client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token="tok-2"))
    async with asyncio.timeout(5):
        result = await pending
    assert result["status"] == "cancelled"
    assert session.client.progress_reports["tok-2"][-1].kind == "end"


async def test_added_workspace_folders_become_sandbox_roots(
    session: Session, tmp_path: Any
) -> None:
    other = tmp_path / "second"
    other.mkdir()
    model = scripted({"content": "ok"})
    with pytest.raises(JsonRpcException) as info:
        await session.request(
            m.RUN_START, {"prompt": "go", "model": model, "sandboxRoot": str(other)}
        )
    assert info.value.code == -32019
    assert str(other) in info.value.message
    session.client.workspace_did_change_workspace_folders(
        lsp.DidChangeWorkspaceFoldersParams(
            lsp.WorkspaceFoldersChangeEvent(
                added=[lsp.WorkspaceFolder(uri=other.as_uri(), name="second")], removed=[]
            )
        )
    )
    result = await session.request(
        m.RUN_START, {"prompt": "go", "model": model, "sandboxRoot": str(other), "runId": "w2"}
    )
    assert result["status"] == "completed"
    assert session.for_run("w2")[0][1]["sandboxRoot"] == str(other.resolve())


async def test_builtin_and_unknown_tools_cannot_be_unregistered(session: Session) -> None:
    with pytest.raises(JsonRpcException) as builtin:
        await session.request(m.TOOLS_UNREGISTER, {"names": ["builtin/shell"]})
    assert builtin.value.code == -32011
    with pytest.raises(JsonRpcException) as unknown:
        await session.request(m.TOOLS_UNREGISTER, {"names": ["client/none"]})
    assert unknown.value.code == -32012
    assert "client/none" in unknown.value.message


async def test_a_malformed_tools_call_reply_gives_a_failed_record(session: Session) -> None:
    async def no_output(params: dict[str, Any]) -> Any:
        return {"result": "forgot the output field"}

    await session.request(m.TOOLS_REGISTER, {"tools": [{**ECHO_TOOL, "name": "client/odd"}]})
    session.tool_handlers["client/odd"] = no_output
    model = scripted({"toolCalls": [call("client/odd")]}, {"content": "went on"})
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model})
    (record,) = result["toolCallHistory"]
    assert (record["success"], record["errorCode"]) == (False, ToolError.code)
    assert "result.output" in record["error"]  # names the missing field
    assert result["content"] == "went on"
