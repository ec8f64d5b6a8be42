"""RunManager in process, with a fake peer: concurrency and memory release."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

from cleveragents.daemon import DaemonConfig, RunManager, RunStateError
from cleveragents.daemon._start import REMEMBERED_MESSAGES
from cleveragents.llm import parse_model_spec
from cleveragents.protocol import wire
from cleveragents.tool import Message
from cleveragents.transcripts import TranscriptStore
from kit.inprocess import FakePeer


async def test_a_hundred_concurrent_runs_deliver_everything_and_are_released(
    tmp_path: Path,
) -> None:
    peer = FakePeer()
    manager = RunManager(peer, DaemonConfig(state_dir=tmp_path))
    manager.register_tools(wire.RegisterToolsParams([
        wire.ToolDefinition("client/echo", "Echo.", {"type": "object"})]))  # fmt: skip
    script = [{"content": "a", "toolCalls": [{"name": "client/echo", "arguments": {"n": 1}}]},
              {"content": "b"}]  # fmt: skip
    refs: list[weakref.ref[Any]] = []

    async def one(i: int) -> wire.RunResult:
        params = wire.RunParams(f"run {i}", run_id=f"r{i}",
                                model={"provider": "scripted", "script": script})  # fmt: skip
        prepared = await manager.prepare(params, [str(tmp_path)])
        refs.append(weakref.ref(prepared.run))
        return await manager.run(prepared)

    async with asyncio.timeout(30):
        results = await asyncio.gather(*(one(i) for i in range(100)))
    assert [r.status for r in results] == ["completed"] * 100
    assert manager.active == {}
    per_run: dict[str, list[int]] = {}
    for _method, params in peer.notifications:
        per_run.setdefault(params["runId"], []).append(params["seq"])
    assert len(per_run) == 100
    assert all(seqs == list(range(1, 9)) for seqs in per_run.values())
    del results
    gc.collect()
    assert [ref() for ref in refs] == [None] * 100  # finished runs are released from memory
    assert len(list((tmp_path / "runs").glob("*.jsonl"))) == 100  # transcripts stay on disk


def test_cancelling_a_run_live_in_another_daemon_says_so(tmp_path: Path) -> None:
    manager = RunManager(FakePeer(), DaemonConfig(state_dir=tmp_path))
    elsewhere = TranscriptStore(tmp_path).claim("theirs")  # another daemon's live run
    with pytest.raises(RunStateError, match="active in another process"):
        manager.cancel(wire.RunIdParams("theirs"))
    elsewhere.close()
    with pytest.raises(RunStateError, match="already finished"):
        manager.cancel(wire.RunIdParams("theirs"))


def test_remembered_conversations_stay_within_a_budget_of_messages(tmp_path: Path) -> None:
    conversations = RunManager(FakePeer(), DaemonConfig(state_dir=tmp_path)).starter.conversations
    huge = [Message("user", "x")] * (REMEMBERED_MESSAGES // 8 + 1)
    conversations.remember("huge", huge)
    assert "huge" not in conversations.messages  # rebuilt from its transcript when continued
    chunk = [Message("user", "y")] * (REMEMBERED_MESSAGES // 8)
    for n in range(12):
        conversations.remember(f"r{n}", chunk)
    assert sum(len(m) for m in conversations.messages.values()) <= REMEMBERED_MESSAGES
    assert "r11" in conversations.messages  # the newest are kept, the oldest go
    assert "r0" not in conversations.messages


async def test_http_models_are_reused_across_runs_and_closed_when_the_client_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One SDK caller per model spec serves every run (one connection pool), and the
    daemon closes it when its client leaves instead of leaving sockets to the GC."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    manager = RunManager(FakePeer(), DaemonConfig(state_dir=tmp_path))
    spec = parse_model_spec({"provider": "openai", "model": "m", "baseUrl": "http://127.0.0.1:9"})
    first = manager.starter._model(spec)
    assert manager.starter._model(spec) is first
    closed: list[object] = []

    async def aclose() -> None:
        closed.append(first)

    monkeypatch.setattr(first, "aclose", aclose)
    await manager.starter.close_models()
    assert closed == [first]
    assert manager.starter._model(spec) is not first  # a later run opens a new one
