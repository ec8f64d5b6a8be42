"""The collector policy: survivors of a full collection are frozen, so later ones scan only
newer objects; cyclic garbage is still collected; everything is unfrozen once the daemon
has no active run."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cleveragents.runs import RunRequest, RunService, RunSettings, _service
from cleveragents.runs._collector import CollectorPolicy
from cleveragents.tool import ToolAnnotations, ToolSpec


@pytest.fixture
def policy() -> Iterator[CollectorPolicy]:
    installed = CollectorPolicy()
    installed.install()
    yield installed
    installed.uninstall()


class Node:
    def __init__(self) -> None:
        self.other: Any = None


def test_a_full_collection_freezes_its_survivors(policy: CollectorPolicy) -> None:
    gc.unfreeze()
    survivors = [Node() for _ in range(100)]
    gc.collect()
    assert policy.freezes >= 1
    assert gc.get_freeze_count() >= len(survivors)
    assert all(not gc.is_finalized(n) for n in survivors)


def test_cycles_made_after_a_freeze_are_still_collected(policy: CollectorPolicy) -> None:
    gc.collect()  # freezes what exists now
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


def test_idle_unfreezes_everything(policy: CollectorPolicy) -> None:
    gc.collect()
    assert gc.get_freeze_count() > 0
    policy.idle()
    assert gc.get_freeze_count() == 0


async def test_the_service_goes_idle_only_when_its_last_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    service = RunService(RunSettings(state_dir=tmp_path, workspace_folders=(str(tmp_path),)))
    monkeypatch.setattr(_service.COLLECTOR, "idle", lambda: calls.append(len(service.active)))
    release = asyncio.Event()

    async def slow(inputs: dict[str, Any]) -> str:
        await release.wait()
        return "ok"

    service.registry.register(ToolSpec("t/slow", "Slow.", {"type": "object"}, slow,
                                       annotations=ToolAnnotations(read_only=True)))  # fmt: skip
    quick = {"provider": "scripted", "script": [{"content": "done"}]}
    waits = {"provider": "scripted", "script": [
        {"toolCalls": [{"name": "t/slow", "arguments": {}}]}, {"content": "done"}]}  # fmt: skip
    long_run = await service.start(RunRequest(prompt="a", run_id="long", model=waits))
    short = await service.start(RunRequest(prompt="b", run_id="short", model=quick))
    await short.result()
    assert calls == []  # the long run is still active
    release.set()
    await asyncio.wait_for(long_run.result(), 10)
    assert calls == [0]


def test_a_daemon_never_idle_still_unfreezes_now_and_then(
    policy: CollectorPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cleveragents.runs._collector.MAX_FREEZES", 2)
    gc.collect()
    gc.collect()
    assert gc.get_freeze_count() > 0
    gc.collect()  # the third full collection unfreezes instead of freezing
    assert gc.get_freeze_count() == 0
