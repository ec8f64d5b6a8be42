"""The RunResult as a run ends: assembled once from the records' own texts, for
``run/finished``, the ``run/start`` reply and the transcript alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit.inprocess import in_process_daemon
from kit.rawpeer import body


async def _run(tmp_path: Path, model: Any, max_iterations: int = 5) -> Any:
    dispatcher, sink = await in_process_daemon(tmp_path)
    dispatcher.receive(body({"jsonrpc": "2.0", "id": "start", "method": "run/start", "params": {
        "prompt": "go", "runId": "r1", "model": model, "maxIterations": max_iterations}}))  # fmt: skip
    await dispatcher.settle(timeout=30)
    return dispatcher, sink


async def test_the_reply_and_run_finished_carry_every_record_in_model_order(
    tmp_path: Path,
) -> None:
    # 2 x 2,500 calls: more records than are handled between two yields to the loop.
    calls = [{"name": f"nowhere/tool-{i % 7}", "arguments": {"i": i}} for i in range(2500)]
    script = [{"content": "a", "toolCalls": calls}, {"content": "b", "toolCalls": calls},
              {"content": "done"}]  # fmt: skip
    dispatcher, sink = await _run(tmp_path, {"provider": "scripted", "script": script})
    (reply,) = sink.replies("start")
    result = reply["result"]
    (finished,) = sink.notifications("run/finished")
    assert finished["result"] == result
    assert result["status"] == "completed"
    assert result["content"] == "done"
    history = result["toolCallHistory"]
    assert [r["callId"] for r in history] == [
        f"call_{iteration}_{i}" for iteration in (1, 2) for i in range(2500)
    ]
    sent = {r["record"]["callId"]: r["record"] for r in sink.notifications("run/toolCall")}
    assert [sent[r["callId"]] for r in history] == history  # the very records sent live
    assert all(r["inputs"]["i"] == int(r["callId"].rsplit("_", 1)[1]) for r in history)
    assert "omittedRecords" not in result
    dispatcher.receive(body({"jsonrpc": "2.0", "id": "get", "method": "run/get",
                             "params": {"runId": "r1"}}))  # fmt: skip
    await dispatcher.settle(timeout=10)
    assert sink.replies("get")[0]["result"] == result  # and the transcript holds the same


async def test_non_finite_numbers_in_model_arguments_still_give_a_result(tmp_path: Path) -> None:
    # A script file may hold NaN (Python's json reads it); no peer could read it back.
    script = tmp_path / "script.json"
    script.write_text('[{"toolCalls": [{"name": "nowhere/x", "arguments": {"n": NaN, '
                      '"m": [Infinity, 1]}}]}, {"content": "ok"}]')  # fmt: skip
    _dispatcher, sink = await _run(tmp_path, f"scripted:{script}")
    (reply,) = sink.replies("start")
    assert reply["result"]["status"] == "completed", reply
    (record,) = reply["result"]["toolCallHistory"]
    assert record["inputs"] == {"n": None, "m": [None, 1]}
    (started,) = sink.notifications("run/toolCallStarted")
    assert started["inputs"] == {"n": None, "m": [None, 1]}
    transcript = (tmp_path / "state" / "runs" / "r1.jsonl").read_text()
    assert "NaN" not in transcript
    assert "Infinity" not in transcript
    for line in transcript.splitlines():
        json.loads(line, parse_constant=_refuse)


def _refuse(name: str) -> None:
    raise ValueError(f"{name} is not JSON")
