"""Each cut tool output keeps a file of its own, even when two calls of one run have ids
that repeat (a model that reuses "call_0" every turn) or differ only in characters a file
name cannot hold ("a/b" and "a_b")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kit.models import client_tool
from kit.rawpeer import LLM_CAPABILITIES, RawDaemon, serve


@pytest.mark.parametrize(("first_id", "second_id"), [("c", "c"), ("a/b", "a_b")])
async def test_each_cut_output_keeps_its_own_file(
    workspace: Path, state_dir: Path, first_id: str, second_id: str
) -> None:
    outputs = ["1" * 5000, "2" * 5000]
    ids = [first_id, second_id]
    daemon = await RawDaemon.start(
        workspace, state_dir, capabilities=LLM_CAPABILITIES, options={"maxToolOutputBytes": 100}
    )
    served = iter(outputs)

    def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "tools/call":
            return {"output": next(served)}
        turn = params["iteration"]
        if turn > 2:
            return {"content": "done", "toolCalls": []}
        call = {"id": ids[turn - 1], "name": "client/big", "arguments": {}}
        return {"content": f"turn {turn}", "toolCalls": [call]}

    try:
        await daemon.call(2, "tools/register", {"tools": [client_tool("client/big")]})
        daemon.send({"jsonrpc": "2.0", "id": 3, "method": "run/start",
                     "params": {"prompt": "go", "runId": "dup", "model": "client"}})  # fmt: skip
        result = (await serve(daemon, 3, answer))["result"]
    finally:
        await daemon.kill()
    records = result["toolCallHistory"]
    assert len(records) == 2
    for record, full in zip(records, outputs, strict=True):
        (path,) = re.findall(r"(/\S+\.txt)\]", record["output"])
        assert Path(path).read_text() == full
