"""The sandbox root is pinned for the run: swapping its name mid-run moves nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from workspace_kit import make_caller, make_sandbox, shell_tool

from cleveragents.tool import SandboxViolationError
from cleveragents.workspace import PinnedRoot, file_tools


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
            with pytest.raises(SandboxViolationError, match="moved or replaced"):
                call(name, **arguments)
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
        with pytest.raises(SandboxViolationError, match="moved or replaced"):
            call("builtin/shell", command="touch planted")
    assert not (sandbox.canary / "planted").exists()
