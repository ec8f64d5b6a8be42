"""The sandbox root is pinned for the run: swapping its name mid-run moves nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workspace_kit import make_caller, make_sandbox, shell_tool

from cleveragents.workspace import (
    PinnedRoot,
    SandboxViolationError,
    _file_list,
    _file_read,
    _file_write,
    file_tools,
)
from cleveragents.workspace._errors import show


def _swap_for_symlink(directory: Path, target: Path) -> None:
    directory.rename(directory.with_name(directory.name + ".moved"))
    directory.symlink_to(target, target_is_directory=True)


@pytest.mark.parametrize("target", ["canary", "/"])
def test_a_root_swapped_mid_run_fails_every_later_file_call(tmp_path: Path, target: str) -> None:
    sandbox = make_sandbox(tmp_path)
    pkg = sandbox.root / "pkg"
    pkg.mkdir()
    (pkg / "mine.txt").write_text("mine")
    before = sandbox.snapshot()
    call = make_caller(file_tools(), pkg)
    pin = PinnedRoot.open(str(pkg))
    with pin.activate():
        assert call("builtin/file-read", path="mine.txt")["content"].startswith("mine")
        # Another run (whose root is the workspace) swaps pkg for a symlink outside.
        _swap_for_symlink(pkg, sandbox.canary if target == "canary" else Path("/"))
        for name, arguments in (
            ("builtin/file-read", {"path": "secret.txt"}),
            ("builtin/file-read", {"path": "mine.txt"}),
            ("builtin/file-write", {"path": "planted.txt", "content": "x"}),
            ("builtin/file-list", {}),
            ("builtin/file-search", {"pattern": "."}),
        ):
            with pytest.raises(SandboxViolationError) as info:
                call(name, **arguments)
            assert info.value.code == SandboxViolationError.code
            assert show(str(pkg)) in info.value.message  # the root is named, not the path
    os.unlink(pkg)
    pkg.with_name("pkg.moved").rename(pkg)
    assert sandbox.snapshot() == before  # nothing written anywhere; the canary is intact


@pytest.mark.parametrize("mode", ["bwrap", "unconfined"])
def test_a_root_swapped_mid_run_fails_the_shell_too(tmp_path: Path, mode: str) -> None:
    sandbox = make_sandbox(tmp_path)
    pkg = sandbox.root / "pkg"
    pkg.mkdir()
    call = make_caller([shell_tool(mode, sandbox).spec()], pkg)
    pin = PinnedRoot.open(str(pkg))
    with pin.activate():
        assert call("builtin/shell", command="true")["exit_code"] == 0
        _swap_for_symlink(pkg, sandbox.canary)
        with pytest.raises(SandboxViolationError) as info:
            call("builtin/shell", command="touch planted")
        assert info.value.code == SandboxViolationError.code
        assert show(str(pkg)) in info.value.message
    assert not (sandbox.canary / "planted").exists()


async def test_through_the_daemon_a_swapped_root_fails_the_rest_of_the_run(
    tmp_path: Path,
) -> None:
    from kit.rawpeer import RawDaemon

    workspace, canary = tmp_path / "ws", tmp_path / "canary"
    (workspace / "pkg").mkdir(parents=True)
    canary.mkdir()
    (canary / "secret.txt").write_text("canary")
    gate = {"name": "client/gate", "description": "Waits.", "inputSchema": {"type": "object"}}
    script = [
        {"toolCalls": [{"name": "client/gate", "arguments": {}}]},
        {"toolCalls": [{"name": "builtin/file-read", "arguments": {"path": "secret.txt"}},
                       {"name": "builtin/file-write", "arguments": {"path": "x", "content": "x"}}]},
        {"content": "done"},
    ]  # fmt: skip
    daemon = await RawDaemon.start(workspace, tmp_path / "state")
    try:
        await daemon.call(2, "tools/register", {"tools": [gate]})
        daemon.send({"jsonrpc": "2.0", "id": 3, "method": "run/start", "params": {
            "prompt": "go", "runId": "a", "sandboxRoot": str(workspace / "pkg"),
            "model": {"provider": "scripted", "script": script}}})  # fmt: skip
        while (call := await daemon.next()).get("method") != "tools/call":
            pass
        _swap_for_symlink(workspace / "pkg", canary)  # as another run's shell could
        daemon.send({"jsonrpc": "2.0", "id": call["id"], "result": {"output": "go on"}})
        result = (await daemon.reply_to(3))["result"]
        assert result["status"] == "completed"
        later = [r for r in result["toolCallHistory"] if r["iteration"] == 2]
        assert [r["success"] for r in later] == [False, False]
        assert all("moved or replaced" in r["error"] for r in later)
        assert "canary" not in json.dumps(result["toolCallHistory"][1:])
        assert sorted(p.name for p in canary.iterdir()) == ["secret.txt"]
    finally:
        await daemon.kill()


# ------------------------------------------------- a swap after the check, before the open


class SwapOnce:
    """Wraps a function so that, on its first call, the root's name is swapped for a
    symlink to ``decoy`` right after the function returns (after the pin's check has
    passed, before anything is opened)."""

    def __init__(self, function: Callable[..., Any], root: Path, decoy: Path) -> None:
        self.function = function
        self.root = root
        self.decoy = decoy
        self.pinned: Path | None = None  # where the pinned directory went

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.function(*args, **kwargs)
        if self.pinned is None:
            self.pinned = self.root.with_name(self.root.name + ".pinned")
            self.root.rename(self.pinned)
            self.root.symlink_to(self.decoy, target_is_directory=True)
        return result


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    """A directory the root's name is swapped to: same file names, other contents."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "inside.txt").write_text("DECOY\n")
    (decoy / "decoy-only.txt").write_text("DECOY\n")
    return decoy


def test_a_read_whose_root_is_swapped_after_resolution_reads_the_pinned_directory(
    tmp_path: Path, decoy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = make_sandbox(tmp_path)
    swap = SwapOnce(_file_read.resolve_path, sandbox.root, decoy)
    monkeypatch.setattr(_file_read, "resolve_path", swap)
    call = make_caller(file_tools(), sandbox.root)
    with PinnedRoot.open(str(sandbox.root)).activate():
        assert call("builtin/file-read", path="inside.txt")["content"] == "inside\n"
    assert swap.pinned is not None


def test_a_write_whose_root_is_swapped_after_resolution_lands_in_the_pinned_directory(
    tmp_path: Path, decoy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = make_sandbox(tmp_path)
    swap = SwapOnce(_file_write.resolve_path, sandbox.root, decoy)
    monkeypatch.setattr(_file_write, "resolve_path", swap)
    call = make_caller(file_tools(), sandbox.root)
    with PinnedRoot.open(str(sandbox.root)).activate():
        call("builtin/file-write", path="new.txt", content="mine\n")
    assert swap.pinned is not None
    assert (swap.pinned / "new.txt").read_text() == "mine\n"
    assert sorted(p.name for p in decoy.iterdir()) == ["decoy-only.txt", "inside.txt"]


def test_a_list_whose_root_is_swapped_after_the_check_lists_the_pinned_directory(
    tmp_path: Path, decoy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = make_sandbox(tmp_path)
    swap = SwapOnce(_file_list.sandbox_root, sandbox.root, decoy)
    monkeypatch.setattr(_file_list, "sandbox_root", swap)
    call = make_caller(file_tools(), sandbox.root)
    with PinnedRoot.open(str(sandbox.root)).activate():
        entries = call("builtin/file-list", pattern="**")["entries"]
    assert swap.pinned is not None
    names = [entry.removeprefix(str(sandbox.root)) for entry in entries]
    assert names == ["/inside.txt", "/sub/", "/sub/file.txt"]
