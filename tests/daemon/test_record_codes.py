"""A failed tool call's record carries its error's code to the client (``errorCode`` in
``run/toolCall`` and the result), so a client tells failures apart without reading text;
a successful call's is null."""

from __future__ import annotations

from typing import Any

from cleveragents.protocol import methods as m
from cleveragents.tool import ToolError, ToolNotFoundError
from kit.lsp import DeliberateError, Session
from kit.models import call, scripted

ECHO_TOOL = {"name": "client/boom", "description": "Fails.", "inputSchema": {"type": "object"}}


async def test_tool_call_notifications_carry_each_failure_s_code(session: Session) -> None:
    async def boom(params: dict[str, Any]) -> Any:
        raise DeliberateError("the editor's tool raised", -32050)

    await session.request(m.TOOLS_REGISTER, {"tools": [ECHO_TOOL]})
    session.tool_handlers["client/boom"] = boom
    model = scripted(
        {"toolCalls": [call("no/such-tool"), call("client/boom"), call("builtin/file-list")]},
        {"content": "done"},
    )
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model, "runId": "codes"})
    sent = {
        p["record"]["toolName"]: p["record"]
        for method, p in session.for_run("codes")
        if method == m.RUN_TOOL_CALL
    }
    assert {name: (r["success"], r["errorCode"]) for name, r in sent.items()} == {
        "no/such-tool": (False, ToolNotFoundError.code),  # -32012
        "client/boom": (False, ToolError.code),  # -32011: the handler failed
        "builtin/file-list": (True, None),
    }
    assert [r["errorCode"] for r in result["toolCallHistory"]] == [
        ToolNotFoundError.code, ToolError.code, None,
    ]  # fmt: skip
    assert result["status"] == "completed"
