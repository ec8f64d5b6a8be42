"""A run's checkpoints in the run service, with no face: when they are taken (before the
first mutating call, after each iteration that ran one, none for reads or when turned
off), the diff of a run and of an iteration, a revert with its conflicts, dry run,
force and undo, a fork's conversation and files, and two runs on one workspace."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents.checkpoints import (
    CheckpointError,
    CheckpointNotFoundError,
    CheckpointSettings,
    CheckpointStore,
)
from cleveragents.runs import ForkFrom, RunRequest, RunService, RunSettings
from cleveragents.runs._checkpoints import CHECKPOINT_NOTE
from cleveragents.tool import (
    Checkpointed,
    CleverAgentsError,
    RunEvent,
    ToolAnnotations,
    ToolCallFinished,
    ToolSpec,
)
from cleveragents.transcripts import RunNotFoundError, RunStateError
from cleveragents.workspace import SandboxViolationError, builtin_tools
from kit.models import call, scripted, shell


def service_for(
    tmp_path: Path, *, checkpoints: bool = True, extra: tuple[ToolSpec, ...] = ()
) -> RunService:
    root = tmp_path / "ws"
    root.mkdir(parents=True, exist_ok=True)
    settings = RunSettings(
        state_dir=tmp_path / "state", workspace_folders=(str(root),), checkpoints=checkpoints
    )
    return RunService(settings, [*builtin_tools(), *extra])


def write(path: str, content: str) -> dict[str, Any]:
    return call("builtin/file-write", path=path, content=content)


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return call("builtin/file-edit", path=path, old_text=old, new_text=new)


async def run(
    service: RunService, run_id: str, *turns: dict[str, Any], **request: Any
) -> list[RunEvent]:
    handle = await service.start(
        RunRequest(
            prompt="go",
            model=scripted(*turns),
            run_id=run_id,
            automation_profile="full-auto",
            **request,
        )
    )
    events = [event async for event in handle.events()]
    result = await handle.result()
    assert result.status == "completed", result.error
    return events


def checkpointed(events: list[RunEvent]) -> list[tuple[int, int]]:
    return [(e.iteration, e.files_changed) for e in events if isinstance(e, Checkpointed)]


async def test_a_run_snapshots_before_its_first_change_and_after_each_iteration_that_made_one(
    tmp_path: Path,
) -> None:
    service = service_for(tmp_path)
    ws = tmp_path / "ws"
    (ws / "keep.txt").write_text("one\n")
    events = await run(
        service, "r1",
        {"content": "look", "toolCalls": [call("builtin/file-read", path="keep.txt")]},
        {"content": "write", "toolCalls": [write("a.txt", "a\n"), write("b.txt", "b\n")]},
        {"content": "read again", "toolCalls": [call("builtin/file-list")]},
        {"content": "edit", "toolCalls": [edit("keep.txt", "one", "two")]},
        {"content": "done"},
    )  # fmt: skip
    # Before iteration 2's first write (the state after iteration 1), after 2, after 4.
    assert checkpointed(events) == [(1, 0), (2, 2), (4, 1)]
    diff = await service.diff("r1")
    assert [(f.path, f.status, f.additions, f.deletions) for f in diff.files] == [
        ("a.txt", "added", 1, 0), ("b.txt", "added", 1, 0), ("keep.txt", "modified", 1, 1),
    ]  # fmt: skip
    assert "+two" in diff.patch
    assert "-one" in diff.patch
    only_4 = await service.diff("r1", iteration=4)
    assert [f.path for f in only_4.files] == ["keep.txt"]
    assert (await service.diff("r1", iteration=3)).files == ()
    await service.aclose()


async def test_the_shell_changes_are_seen_and_undone_with_the_file_tools(tmp_path: Path) -> None:
    service = service_for(tmp_path)
    ws = tmp_path / "ws"
    (ws / "src").mkdir()
    (ws / "src" / "m.py").write_text("x = 1\n")
    (ws / "gone").mkdir()
    (ws / "gone" / "f").write_text("f\n")
    (ws / "old.txt").write_text("old\n")
    await run(
        service, "r1",
        {"content": "", "toolCalls": [shell(
            "sed -i 's/1/2/' src/m.py && rm -r gone && mv old.txt new.txt && mkdir -p d/e "
            "&& printf 'bin\\000ary' > d/e/blob && ln -s src/m.py link"
        )]},
        {"content": "done"},
    )  # fmt: skip
    diff = await service.diff("r1")
    assert {(f.path, f.status) for f in diff.files} == {
        ("d/e/blob", "added"), ("gone/f", "deleted"), ("link", "added"),
        ("new.txt", "added"), ("old.txt", "deleted"), ("src/m.py", "modified"),
    }  # fmt: skip
    assert next(f for f in diff.files if f.path == "d/e/blob").binary
    reverted = await service.revert("r1")
    assert reverted.applied
    assert reverted.conflicts == ()
    assert sorted(p.name for p in ws.iterdir()) == ["gone", "old.txt", "src"]
    assert (ws / "src" / "m.py").read_text() == "x = 1\n"
    assert (ws / "gone" / "f").read_text() == "f\n"
    await service.aclose()


async def test_a_revert_refuses_a_file_changed_since_then_force_then_undo(tmp_path: Path) -> None:
    service = service_for(tmp_path)
    ws = tmp_path / "ws"
    (ws / "a.txt").write_text("mine\n")
    (ws / "other.txt").write_text("untouched by the run\n")
    await run(service, "r1", {"content": "", "toolCalls": [write("a.txt", "run's\n")]},
              {"content": "done"})  # fmt: skip
    (ws / "a.txt").write_text("the user's edit\n")
    (ws / "other.txt").write_text("the user's too\n")

    dry = await service.revert("r1", dry_run=True)
    assert [c.path for c in dry.conflicts] == ["a.txt"]
    assert not dry.applied
    refused = await service.revert("r1")
    assert [c.path for c in refused.conflicts] == ["a.txt"]
    assert not refused.applied
    assert (ws / "a.txt").read_text() == "the user's edit\n"

    forced = await service.revert("r1", force=True)
    assert forced.applied
    assert forced.restore_checkpoint_id is not None
    assert (ws / "a.txt").read_text() == "mine\n"
    assert (ws / "other.txt").read_text() == "the user's too\n"  # not the run's: left alone

    undo = await service.restore_checkpoint(forced.restore_checkpoint_id, root=ws)
    assert undo.applied
    assert (ws / "a.txt").read_text() == "the user's edit\n"
    with pytest.raises(CheckpointNotFoundError):
        await service.restore_checkpoint("0" * 16, root=ws)
    await service.aclose()


async def test_checkpoints_off_by_request_or_by_the_service_take_none(tmp_path: Path) -> None:
    for on_service, on_request in ((True, False), (False, True)):
        service = service_for(tmp_path / f"{on_service}", checkpoints=on_service)
        events = await run(
            service, "r1", {"content": "", "toolCalls": [write("a.txt", "a")]},
            {"content": "done"}, checkpoints=on_request,
        )  # fmt: skip
        assert checkpointed(events) == []
        assert (await service.diff("r1")).files == ()
        nothing = await service.revert("r1")
        assert not nothing.applied
        assert nothing.files == ()
        await service.aclose()


async def test_diff_and_revert_of_unknown_and_live_runs(tmp_path: Path) -> None:
    service = service_for(tmp_path)
    with pytest.raises(RunNotFoundError):
        await service.diff("nope")
    with pytest.raises(RunNotFoundError):
        await service.revert("nope")
    gate = asyncio.Event()

    async def wait(inputs: dict[str, Any]) -> str:
        await gate.wait()
        return "ok"

    service.registry.register(ToolSpec("t/wait", "Waits.", {"type": "object"}, wait))
    handle = await service.start(RunRequest(
        prompt="go", run_id="live", automation_profile="full-auto",
        model=scripted({"content": "", "toolCalls": [write("a.txt", "a"), call("t/wait")]},
                       {"content": "done"}),
    ))  # fmt: skip
    async for event in handle.events():  # until the write has run
        if isinstance(event, ToolCallFinished):
            break
    with pytest.raises(RunStateError):
        await service.revert("live")
    with pytest.raises(RunStateError):
        await service.restore_checkpoint("0" * 16, root=tmp_path / "ws")
    live = await service.diff("live")  # a live run's diff: so far
    assert [f.path for f in live.files] == ["a.txt"]
    gate.set()
    await handle.result()
    await service.aclose()


async def test_a_fork_continues_the_conversation_at_an_iteration_and_restores_its_files(
    tmp_path: Path,
) -> None:
    service = service_for(tmp_path)
    ws = tmp_path / "ws"
    await run(
        service, "r1",
        {"content": "first", "toolCalls": [write("a.txt", "1\n")]},
        {"content": "second", "toolCalls": [write("a.txt", "2\n")]},
        {"content": "done"},
    )  # fmt: skip
    await run(service, "f1", {"content": "forked"}, fork_from=ForkFrom("r1", 1))
    conversation = service.store.conversation("f1")
    texts = [(m.role, m.content) for m in conversation]
    assert texts[:3] == [("user", "go"), ("assistant", "first"), ("tool", texts[2][1])]
    assert ("assistant", "second") not in texts
    assert (ws / "a.txt").read_text() == "2\n"  # files left alone without restore_files

    await run(service, "f2", {"content": "forked"},
              fork_from=ForkFrom("r1", 1, restore_files=True))  # fmt: skip
    assert (ws / "a.txt").read_text() == "1\n"

    (ws / "a.txt").write_text("user\n")
    with pytest.raises(CheckpointError):
        await service.start(RunRequest(
            prompt="go", model=scripted({"content": "x"}), run_id="f3",
            fork_from=ForkFrom("r1", 0, restore_files=True),
        ))  # fmt: skip
    assert (ws / "a.txt").read_text() == "user\n"
    with pytest.raises(RunStateError):
        await service.start(RunRequest(
            prompt="go", model=scripted({"content": "x"}), run_id="f4", fork_from=ForkFrom("r1", 9),
        ))  # fmt: skip
    await service.aclose()


async def test_two_runs_on_one_workspace_revert_each_its_own_files(tmp_path: Path) -> None:
    service = service_for(tmp_path)
    ws = tmp_path / "ws"
    await run(service, "r1", {"content": "", "toolCalls": [write("one.txt", "1")]},
              {"content": "done"})  # fmt: skip
    await run(service, "r2", {"content": "", "toolCalls": [write("two.txt", "2")]},
              {"content": "done"})  # fmt: skip
    assert [f.path for f in (await service.diff("r2")).files] == ["two.txt"]
    first = await service.revert("r1")
    assert first.applied
    assert first.conflicts == ()
    assert sorted(p.name for p in ws.iterdir()) == ["two.txt"]
    await service.aclose()


async def test_a_failing_snapshot_is_noted_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = service_for(tmp_path)

    def broken(self: CheckpointStore, **_: Any) -> None:
        raise CheckpointError("the workspace holds more than 3 entries")

    monkeypatch.setattr(CheckpointStore, "take", broken)
    events = await run(service, "r1", {"content": "", "toolCalls": [write("a.txt", "a")]},
                       {"content": "done"})  # fmt: skip
    assert checkpointed(events) == []
    assert (tmp_path / "ws" / "a.txt").read_text() == "a"
    lines = (tmp_path / "state" / "runs" / "r1.jsonl").read_text()
    assert CHECKPOINT_NOTE in lines
    assert "more than 3 entries" in lines
    await service.aclose()


async def test_pruning_after_a_run_removes_old_checkpoints_but_never_a_live_run_s(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    settings = RunSettings(
        state_dir=tmp_path / "state", workspace_folders=(str(root),),
        checkpoint_settings=CheckpointSettings(max_store_bytes=1),  # always over the cap
    )  # fmt: skip
    gate = asyncio.Event()

    async def wait(inputs: dict[str, Any]) -> str:
        await gate.wait()
        return "ok"

    spec = ToolSpec("t/wait", "Waits.", {"type": "object"}, wait,
                    annotations=ToolAnnotations(read_only=True))  # fmt: skip
    service = RunService(settings, [*builtin_tools(), spec])
    live = await service.start(RunRequest(
        prompt="go", run_id="live", automation_profile="full-auto",
        model=scripted({"content": "", "toolCalls": [write("live.txt", "1")]},
                       {"content": "", "toolCalls": [call("t/wait")]}, {"content": "done"}),
    ))  # fmt: skip
    async for event in live.events():  # before its write, then after its iteration 1
        if isinstance(event, Checkpointed) and event.iteration == 1:
            break
    store = await service.checkpoint_stores.get(str(root))
    await run(service, "done", {"content": "", "toolCalls": [write("done.txt", "2")]},
              {"content": "done"})  # fmt: skip
    await service.checkpoint_stores.pruned()  # the finished run's end pruned the store
    assert len(await asyncio.to_thread(store.checkpoints, "live")) == 2
    assert await asyncio.to_thread(store.checkpoints, "done") == ()
    gate.set()
    await live.result()
    assert [f.path for f in (await service.diff("live")).files] == ["live.txt"]
    await service.aclose()


async def test_a_face_serving_other_folders_can_neither_see_nor_revert_a_run(
    tmp_path: Path,
) -> None:
    service = service_for(tmp_path)
    await run(service, "r1", {"content": "", "toolCalls": [write("a.txt", "a")]},
              {"content": "done"})  # fmt: skip
    elsewhere = [str(tmp_path / "other")]
    with pytest.raises(SandboxViolationError):
        await service.diff("r1", roots=elsewhere)
    with pytest.raises(SandboxViolationError):
        await service.revert("r1", roots=elsewhere)
    assert (tmp_path / "ws" / "a.txt").read_text() == "a"
    assert [f.path for f in (await service.diff("r1", roots=[str(tmp_path)])).files] == ["a.txt"]
    await service.aclose()


async def _codes(tmp_path: Path, run_id: str, checkpoint_id: str, iteration: int) -> list[int]:
    """The code of each refusal of these calls (a call that succeeds adds none)."""
    service = service_for(tmp_path)
    calls = (
        lambda: service.diff(run_id), lambda: service.diff("r0", iteration=iteration),
        lambda: service.revert(run_id), lambda: service.revert("r0", to_iteration=iteration),
        lambda: service.restore_checkpoint(checkpoint_id, root=tmp_path / "ws"),
        lambda: service.checkpoint_root(checkpoint_id, [str(tmp_path / "ws")]),
    )  # fmt: skip
    codes = []
    for make in calls:
        try:
            await make()
        except CleverAgentsError as exc:  # anything else fails the test
            codes.append(exc.code)
    await service.aclose()
    return codes


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    run_id=st.text(max_size=40),
    checkpoint_id=st.text(max_size=40),
    iteration=st.integers(min_value=-(2**70), max_value=2**70),
)
def test_any_run_id_checkpoint_id_or_iteration_is_refused_with_a_coded_error(
    tmp_path: Path, run_id: str, checkpoint_id: str, iteration: int
) -> None:
    codes = asyncio.run(_codes(tmp_path, run_id, checkpoint_id, iteration))
    assert len(codes) == 6  # no run, no checkpoint: each call is refused
    assert all(code < -32000 or code == -32602 for code in codes), codes
