"""The run service in process, with no face: typed events in order, the result, cancel,
close, concurrency and memory release, and a transcript that cannot be written."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import weakref
from pathlib import Path
from typing import Any

import pytest

from cleveragents.llm import parse_model_spec
from cleveragents.runs import RunRequest, RunService, RunSettings, StateDirError
from cleveragents.runs._service import REMEMBERED_MESSAGES
from cleveragents.tool import (
    IterationFinished,
    IterationStarted,
    Message,
    MessageDelta,
    RunEvent,
    RunFinished,
    RunStarted,
    ToolAnnotations,
    ToolCallFinished,
    ToolCallStarted,
    ToolSpec,
)
from cleveragents.transcripts import RunStateError, TranscriptStore


def service_for(tmp_path: Path, *tools: ToolSpec) -> RunService:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
    return RunService(settings, tools)


def echo() -> ToolSpec:
    # Read-only: a tool that may write would have the run take checkpoints around it.
    return ToolSpec(
        "t/echo", "Echo.", {"type": "object"}, lambda inputs: inputs.get("n"),
        annotations=ToolAnnotations(read_only=True),
    )  # fmt: skip


def scripted(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"provider": "scripted", "script": list(turns)}


async def test_a_run_gives_every_event_in_order_as_typed_classes_then_its_result(
    tmp_path: Path,
) -> None:
    service = service_for(tmp_path, echo())
    model = scripted(
        {"content": "a", "toolCalls": [{"name": "t/echo", "arguments": {"n": 7}}]},
        {"content": "done"},
    )
    handle = await service.start(
        RunRequest(prompt="go", model=model, run_id="r1", automation_profile="trusted")
    )
    events: list[RunEvent] = [event async for event in handle.events()]
    kinds = [type(e) for e in events]
    assert kinds == [
        RunStarted, IterationStarted, MessageDelta, ToolCallStarted, ToolCallFinished,
        IterationFinished, IterationStarted, MessageDelta, IterationFinished, RunFinished,
    ]  # fmt: skip
    assert {e.run_id for e in events} == {"r1"}
    recorded = [e.seq for e in events if not isinstance(e, IterationStarted)]
    assert recorded == list(range(1, 9))  # seq numbers what the transcript keeps
    started = events[3]
    assert isinstance(started, ToolCallStarted)
    assert (started.tool_name, started.inputs) == ("t/echo", {"n": 7})
    result = await handle.result()
    assert (result.status, result.content, result.iterations) == ("completed", "done", 2)
    assert result.tool_call_history[0].output == 7
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.result is result
    lines = (tmp_path / "state" / "runs" / "r1.jsonl").read_text().splitlines()
    assert json.loads(handle.result_text or "")["content"] == "done"
    assert json.loads(lines[-1])["params"]["result"] == json.loads(handle.result_text or "")
    await service.aclose()


async def test_cancel_ends_a_run_cancelled_and_aclose_ends_every_run(tmp_path: Path) -> None:
    started = asyncio.Event()

    async def hang(inputs: dict[str, Any]) -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    service = service_for(tmp_path, ToolSpec("t/hang", "Hangs.", {"type": "object"}, hang))
    loop_forever = scripted({"toolCalls": [{"name": "t/hang", "arguments": {}}]})
    request = RunRequest(prompt="go", model=loop_forever, automation_profile="trusted")
    handle = await service.start(request)
    await asyncio.wait_for(started.wait(), 5)
    handle.cancel("enough")
    result = await asyncio.wait_for(handle.result(), 5)
    assert result.status == "cancelled"
    assert result.tool_call_history[0].error_code == -32030
    started.clear()
    other = await service.start(RunRequest(prompt="again", model=loop_forever,
                                           automation_profile="trusted"))  # fmt: skip
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.wait_for(service.aclose(), 5)
    assert (await other.result()).status == "cancelled"
    assert service.active == {}


async def test_a_run_whose_transcript_cannot_be_written_stops_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: no further model call or tool call, ``failed`` with -32029 naming the
    state dir and the OS error, and ``RunFinished`` still reaches the face."""
    calls: list[int] = []
    service = service_for(tmp_path, ToolSpec(
        "t/count", "Counts.", {"type": "object"}, lambda inputs: calls.append(1) or "ok"))  # fmt: skip
    real_write = os.write
    written = {"lines": 0}

    def full_disk(fd: int, data: Any) -> int:
        if bytes(data[:1]) == b"{" and b'"run/toolCall"' in bytes(data[:40]):
            written["lines"] += 1
            if written["lines"] >= 2:
                raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr("cleveragents.transcripts._files.os.write", full_disk)
    forever = scripted(*[{"toolCalls": [{"name": "t/count", "arguments": {}}]}] * 50)
    request = RunRequest(prompt="go", model=forever, max_iterations=50,
                         automation_profile="trusted")  # fmt: skip
    handle = await service.start(request)
    events = [event async for event in handle.events()]
    result = await handle.result()
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == StateDirError.code
    assert str(tmp_path / "state") in result.error.message
    assert "No space left on device" in result.error.message
    assert len(calls) == 2  # the call whose record could not be written was the last
    assert isinstance(events[-1], RunFinished)
    await service.aclose()


async def test_a_hundred_concurrent_runs_deliver_everything_and_are_released(
    tmp_path: Path,
) -> None:
    service = service_for(tmp_path, echo())
    model = scripted({"content": "a", "toolCalls": [{"name": "t/echo", "arguments": {"n": 1}}]},
                     {"content": "b"})  # fmt: skip
    refs: list[weakref.ref[Any]] = []
    seqs: dict[str, list[int]] = {}

    class Observer:
        def on_event(self, event: RunEvent, text: str | None, /) -> None:
            if text is not None:
                seqs.setdefault(event.run_id, []).append(json.loads(text)["seq"])

    async def one(i: int) -> str:
        handle = await service.start(RunRequest(prompt=f"run {i}", run_id=f"r{i}", model=model, automation_profile="trusted"),
                                     Observer())  # fmt: skip
        refs.append(weakref.ref(service.active[handle.run_id]))
        return (await handle.result()).status

    async with asyncio.timeout(30):
        statuses = await asyncio.gather(*(one(i) for i in range(100)))
    assert statuses == ["completed"] * 100
    assert service.active == {}
    assert len(seqs) == 100
    assert all(s == list(range(1, 9)) for s in seqs.values())
    gc.collect()
    assert [ref() for ref in refs] == [None] * 100  # finished runs are released from memory
    assert len(list((tmp_path / "state" / "runs").glob("*.jsonl"))) == 100


def test_cancelling_a_run_live_in_another_process_says_so(tmp_path: Path) -> None:
    service = service_for(tmp_path)
    elsewhere = TranscriptStore(tmp_path / "state").claim("theirs")  # another daemon's run
    with pytest.raises(RunStateError, match="active in another process"):
        service.cancel("theirs", "test")
    elsewhere.close()
    with pytest.raises(RunStateError, match="already finished"):
        service.cancel("theirs", "test")


def test_remembered_conversations_stay_within_a_budget_of_messages(tmp_path: Path) -> None:
    conversations = service_for(tmp_path).conversations
    huge = [Message("user", "x")] * (REMEMBERED_MESSAGES // 8 + 1)
    conversations.remember("huge", huge)
    assert "huge" not in conversations.messages  # rebuilt from its transcript when continued
    chunk = [Message("user", "y")] * (REMEMBERED_MESSAGES // 8)
    for n in range(12):
        conversations.remember(f"r{n}", chunk)
    assert sum(len(m) for m in conversations.messages.values()) <= REMEMBERED_MESSAGES
    assert "r11" in conversations.messages  # the newest are kept, the oldest go
    assert "r0" not in conversations.messages


async def test_http_models_are_reused_across_runs_and_closed_with_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One SDK caller per model spec serves every run (one connection pool), and the
    service closes it instead of leaving sockets to the garbage collector."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    service = service_for(tmp_path)
    spec = parse_model_spec({"provider": "openai", "model": "m", "baseUrl": "http://127.0.0.1:9"})
    first = service.model(spec)
    assert service.model(spec) is first
    closed: list[object] = []

    async def aclose() -> None:
        closed.append(first)

    monkeypatch.setattr(first, "aclose", aclose)
    await service.aclose()
    assert closed == [first]
    assert service.model(spec) is not first  # a later run opens a new one
