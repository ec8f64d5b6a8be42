"""A run's snapshot after an iteration of built-in file tools reads only the files they
wrote (each call's output names its real path); after any other mutating call, a
failed or unfinished file call, it reads the whole workspace. Either way the
checkpoint holds what a full read would find of the run's changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cleveragents.checkpoints import CheckpointStore
from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.tool import Checkpointed, RunEvent, ToolAnnotations, ToolSpec
from cleveragents.workspace import builtin_tools
from kit.models import call, scripted, shell


def service_for(tmp_path: Path, *extra: ToolSpec) -> tuple[RunService, Path]:
    root = tmp_path / "ws"
    root.mkdir(parents=True, exist_ok=True)
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
    return RunService(settings, [*builtin_tools(), *extra]), root


def write(path: str, content: str) -> dict[str, Any]:
    return call("builtin/file-write", path=path, content=content)


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return call("builtin/file-edit", path=path, old_text=old, new_text=new)


def turn(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"content": "", "toolCalls": list(calls)}


async def run(service: RunService, run_id: str, *turns: dict[str, Any]) -> list[RunEvent]:
    request = RunRequest(
        prompt="go",
        model=scripted(*turns, {"content": "done"}),
        run_id=run_id,
        automation_profile="full-auto",
    )
    handle = await service.start(request)
    events = [event async for event in handle.events()]
    await handle.result()
    return events


def checkpointed(events: list[RunEvent]) -> list[tuple[int, int]]:
    return [(e.iteration, e.files_changed) for e in events if isinstance(e, Checkpointed)]


def store_of(service: RunService, root: Path) -> CheckpointStore:
    return service.checkpoint_stores.open(str(root))


def full_read_agrees(store: CheckpointStore, root: Path, run_id: str) -> None:
    """The run's last checkpoint is what a full read of the workspace finds now."""
    last = store.checkpoints(run_id)[-1]
    assert store.diff(last.id).files == ()
    full = store.take(run_id="a full read", previous_id=last.id)
    assert full.changed_paths == ()


async def test_file_tool_iterations_read_only_the_paths_they_wrote(tmp_path: Path) -> None:
    service, root = service_for(tmp_path)
    (root / "app.py").write_text("print('a')\n")
    for number in range(30):
        (root / f"other{number}.txt").write_text("untouched\n")
    events = await run(
        service,
        "run-1",
        turn(write("notes.md", "one\n")),
        turn(edit("app.py", "'a'", "'b'"), write("pkg/deep/new.py", "x = 1\n")),
        turn(edit("notes.md", "one", "two")),
    )
    assert checkpointed(events) == [(0, 0), (1, 1), (2, 4), (3, 1)]
    store = store_of(service, root)
    assert store.full_reads == 1  # the first, before the run's first change
    steps = await service.diff("run-1", iteration=2)
    assert [(f.path, f.status) for f in steps.files] == [
        ("app.py", "modified"),
        ("pkg/deep/new.py", "added"),
    ]
    full_read_agrees(store, root, "run-1")
    await service.revert("run-1")
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith("other")) == ["app.py"]
    assert (root / "app.py").read_text() == "print('a')\n"
    await service.aclose()


async def test_a_write_through_a_link_is_recorded_at_its_real_path(
    tmp_path: Path,
) -> None:
    service, root = service_for(tmp_path)
    (root / "real").mkdir()
    (root / "real/target.txt").write_text("before\n")
    (root / "via").symlink_to("real")
    (root / "alias.txt").symlink_to("real/target.txt")
    events = await run(
        service, "run-1", turn(write("via/x.txt", "x\n"), edit("alias.txt", "before", "after"))
    )
    assert checkpointed(events) == [(0, 0), (1, 2)]
    store = store_of(service, root)
    assert store.full_reads == 1
    assert store.checkpoints("run-1")[-1].changed_paths == ("real/target.txt", "real/x.txt")
    full_read_agrees(store, root, "run-1")
    await service.revert("run-1")
    assert not (root / "real/x.txt").exists()
    assert (root / "real/target.txt").read_text() == "before\n"
    assert (root / "via").is_symlink()
    assert (root / "alias.txt").is_symlink()
    await service.aclose()


async def test_a_shell_iteration_reads_the_whole_workspace(tmp_path: Path) -> None:
    service, root = service_for(tmp_path)
    (root / "a.txt").write_text("a\n")
    events = await run(
        service,
        "run-1",
        turn(write("a.txt", "b\n")),
        turn(shell("mkdir -p made && echo hi > made/by-shell.txt && rm a.txt")),
        turn(write("c.txt", "c\n")),
    )
    assert checkpointed(events) == [(0, 0), (1, 1), (2, 3), (3, 1)]
    store = store_of(service, root)
    assert store.full_reads == 2  # the first, and the shell's iteration
    full_read_agrees(store, root, "run-1")
    await service.aclose()


async def test_a_failed_file_call_or_an_unknown_mutating_tool_reads_the_whole_workspace(
    tmp_path: Path,
) -> None:
    def behind_the_run(_: dict[str, Any]) -> dict[str, Any]:
        (tmp_path / "ws" / "by-tool.txt").write_text("written by a tool of its own\n")
        return {"ok": True}

    tool = ToolSpec(
        name="acme/touch",
        description="Writes a file the run cannot name.",
        input_schema={"type": "object"},
        handler=behind_the_run,
        annotations=ToolAnnotations(destructive=True),
    )
    service, root = service_for(tmp_path, tool)
    (root / "a.txt").write_text("a\n")
    events = await run(
        service,
        "run-1",
        turn(write("b.txt", "b\n")),
        turn(edit("a.txt", "not there", "x"), write("d.txt", "d\n")),  # the edit fails
        turn(call("acme/touch")),
    )
    assert checkpointed(events) == [(0, 0), (1, 1), (2, 1), (3, 1)]
    store = store_of(service, root)
    assert store.full_reads == 3
    assert store.checkpoints("run-1")[-1].changed_paths == ("by-tool.txt",)
    full_read_agrees(store, root, "run-1")
    await service.aclose()


async def test_a_file_changed_behind_the_run_is_not_the_run_s_and_its_revert_leaves_it(
    tmp_path: Path,
) -> None:
    """A read-only tool stands for the user's editor saving a file while the run works:
    the run's snapshots of its own writes leave that file out, so its diff does not show
    it and its revert does not touch it."""

    def user_saves(_: dict[str, Any]) -> dict[str, Any]:
        (tmp_path / "ws" / "user.txt").write_text("the user's edit\n")
        return {"ok": True}

    tool = ToolSpec(
        name="acme/look",
        description="Reads (and, behind the run's back, the user saves a file).",
        input_schema={"type": "object"},
        handler=user_saves,
        annotations=ToolAnnotations(read_only=True),
        kind="read",
    )
    service, root = service_for(tmp_path, tool)
    (root / "user.txt").write_text("before\n")
    await run(
        service,
        "run-1",
        turn(write("a.txt", "a\n")),
        turn(call("acme/look"), write("b.txt", "b\n")),
    )
    store = store_of(service, root)
    assert store.full_reads == 1
    diff = await service.diff("run-1")
    assert [f.path for f in diff.files] == ["a.txt", "b.txt"]
    done = await service.revert("run-1")
    assert done.applied
    assert done.conflicts == ()
    assert (root / "user.txt").read_text() == "the user's edit\n"
    assert not (root / "a.txt").exists()
    assert not (root / "b.txt").exists()
    await service.aclose()
