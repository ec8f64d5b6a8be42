"""The walk behind file-list and file-search: depth cap, descriptors, stop flag."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from workspace_kit import Caller, Sandbox, make_caller

from cleveragents.workspace import WorkspaceLimits, WorkspaceToolError, file_tools
from cleveragents.workspace._file_list import file_list
from cleveragents.workspace._stop import StopFlag, _Stopped, run_stoppable
from cleveragents.workspace._walk import DEFAULT_MAX_DEPTH, Walk

DEEP = 1500


def open_descriptors(under: Path) -> set[str]:
    """This process's descriptors open on something under ``under``: only those can be
    the walk's (another thread of the test process may open or close its own meanwhile)."""
    prefix = os.path.realpath(under)
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing (the listing's own descriptor too)
            continue
        if target == prefix or target.startswith(prefix + os.sep):
            found.add(fd)
    return found


def remove_chain(top: Path, name: str, levels: int) -> None:
    """Remove a chain ``top/name/name/...`` bottom-up, one descriptor at a time (rmtree
    recurses, and paths from the top make it quadratic)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = below
    for child in os.listdir(fd):
        os.unlink(child, dir_fd=fd)
    for _ in range(levels):
        above = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = above
        os.rmdir(name, dir_fd=fd)
    os.close(fd)


@pytest.fixture
def deep_tree(call: Caller, sandbox: Sandbox) -> Iterator[str]:
    """A chain of 1,500 directories ``d/d/.../d/f.txt`` made by one file-write."""
    path = "d/" * DEEP + "f.txt"
    call("builtin/file-write", path=path, content="needle\n")
    yield path
    remove_chain(sandbox.root, "d", DEEP)


def test_a_1500_level_tree_made_by_one_write_is_listed_down_to_the_depth_cap(
    call: Caller, sandbox: Sandbox, deep_tree: str
) -> None:
    result = call("builtin/file-list", pattern="**")
    chain = [e for e in result["entries"] if e.startswith(sandbox.at("d/"))]
    assert len(chain) == DEFAULT_MAX_DEPTH == WorkspaceLimits().max_walk_depth
    assert chain[-1] == sandbox.at("d/" * DEFAULT_MAX_DEPTH)
    assert result["truncated"] is True
    assert f"{DEFAULT_MAX_DEPTH} levels" in result["note"]


def test_a_1500_level_tree_is_searched_down_to_the_depth_cap_and_says_so(
    call: Caller, deep_tree: str
) -> None:
    result = call("builtin/file-search", pattern="needle")
    assert result["matches"] == []  # f.txt lies 1,501 levels down, past the cap
    assert result["truncated"] is True
    assert f"{DEFAULT_MAX_DEPTH} levels" in result["note"]


def test_a_smaller_depth_cap_is_honoured_and_reported(sandbox: Sandbox) -> None:
    (sandbox.root / "a" / "b" / "c").mkdir(parents=True)
    (sandbox.root / "a" / "b" / "c" / "deep.txt").write_text("needle\n")
    (sandbox.root / "a" / "b" / "near.txt").write_text("needle\n")
    call = make_caller(file_tools(WorkspaceLimits(max_walk_depth=3)), sandbox.root)
    listed = call("builtin/file-list", pattern="a/**")
    assert listed["entries"] == [
        sandbox.at("a/b/"),
        sandbox.at("a/b/c/"),
        sandbox.at("a/b/near.txt"),
    ]
    assert "3 levels" in listed["note"]
    found = call("builtin/file-search", pattern="needle")
    assert [hit["path"] for hit in found["matches"]] == [sandbox.at("a/b/near.txt")]
    assert "3 levels" in found["note"]


def test_a_globs_own_depth_does_not_count_as_the_depth_cap(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_walk_depth=1)), sandbox.root)
    result = call("builtin/file-list", pattern="*")
    assert result == {
        "entries": [sandbox.at("inside.txt"), sandbox.at("sub/")],
        "truncated": False,
    }


def test_a_chain_of_directories_is_walked_holding_two_descriptors(
    call: Caller, sandbox: Sandbox, deep_tree: str
) -> None:
    before = open_descriptors(sandbox.base)
    most = 0
    for _entry in Walk(str(sandbox.root), str(sandbox.root), 10_000):
        most = max(most, len(open_descriptors(sandbox.base) - before))
    assert most <= 2
    assert open_descriptors(sandbox.base) == before


def test_a_walk_cut_short_or_stopped_closes_every_descriptor(
    call: Caller, sandbox: Sandbox, deep_tree: str
) -> None:
    before = open_descriptors(sandbox.base)
    cut = make_caller(file_tools(WorkspaceLimits(max_list_results=100)), sandbox.root)
    assert cut("builtin/file-list", pattern="**")["truncated"] is True
    stopped = StopFlag()
    stopped.event.set()
    with pytest.raises(_Stopped):
        file_list({"pattern": "**", "sandbox_root": str(sandbox.root)}, WorkspaceLimits(), stopped)
    assert open_descriptors(sandbox.base) == before


# ----------------------------------------------------------------------------- stopping


@pytest.fixture
def ignored_tree(sandbox: Sandbox) -> dict[str, Any]:
    """A list of 1,000 files that .gitignore hides: a walk that yields nothing (and reads
    fewer entries than the walk's own look at the flag while it reads a directory)."""
    many = sandbox.root / "many"
    many.mkdir()
    for index in range(1000):
        (many / f"f{index}.tmp").touch()
    (sandbox.root / ".gitignore").write_text("*.tmp\n")
    return {
        "path": "many",
        "pattern": "**",
        "sandbox_root": str(sandbox.root),
        "resource_bindings": {},
    }


def test_a_walk_of_ignored_entries_still_stops_at_its_deadline(
    ignored_tree: dict[str, Any],
) -> None:
    limits = WorkspaceLimits()
    assert file_list(ignored_tree, limits)["entries"] == []  # nothing to yield: all ignored
    with pytest.raises(WorkspaceToolError) as info:
        file_list(ignored_tree, limits, StopFlag(timeout_s=0.0))
    assert info.value.code == WorkspaceToolError.code
    assert not isinstance(info.value, _Stopped)  # the deadline, not a cancel


class GatedStop(StopFlag):
    """Delegates to a call's real flag; at its first check, says so and waits (bounded)
    for that flag to be set, so the cancel lands while the walk is mid-way."""

    def __init__(self, flag: StopFlag, started: threading.Event) -> None:
        super().__init__()
        self.flag = flag
        self.started = started
        self.checks = 0

    def check(self) -> None:
        self.checks += 1
        if self.checks == 1:
            self.started.set()
            self.flag.event.wait(10)
        self.flag.check()


async def test_a_cancelled_list_stops_its_walk_among_ignored_entries(
    ignored_tree: dict[str, Any],
) -> None:
    started = threading.Event()
    gates: list[GatedStop] = []
    workers: list[threading.Thread] = []
    outcome: list[BaseException] = []

    def work(inputs: dict[str, Any], limits: WorkspaceLimits, stop: StopFlag) -> dict[str, Any]:
        workers.append(threading.current_thread())
        gates.append(GatedStop(stop, started))
        try:
            return file_list(inputs, limits, gates[0])
        except Exception as exc:
            outcome.append(exc)
            raise

    task = asyncio.ensure_future(
        run_stoppable("file-list", work, ignored_tree, WorkspaceLimits(), 60.0)
    )
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [worker] = workers
    await asyncio.to_thread(worker.join, 20)
    assert not worker.is_alive()
    assert [type(exc) for exc in outcome] == [_Stopped]  # stopped by the flag, not finished
    assert gates[0].checks == 1  # at the first check after the cancel


def test_a_big_directory_is_checked_for_a_stop_while_it_is_read(sandbox: Sandbox) -> None:
    many = sandbox.root / "many"
    many.mkdir()
    for index in range(3000):
        (many / f"f{index}").touch()
    seen: list[int] = []  # entries visited at each look at the flag
    walk = Walk(str(sandbox.root), str(many), 10_000, stop=lambda: seen.append(walk.visited))
    assert len(list(walk)) == 3000
    # Two looks while its 3,000 entries are read (one per 1,024), then one per entry.
    assert seen[:3] == [0, 0, 0]
    assert len(seen) == 2 + 3000
