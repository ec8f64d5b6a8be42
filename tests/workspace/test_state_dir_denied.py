"""A state dir inside the sandbox root (``--state-dir .cleveragents`` in a project, an
editor opened on the folder that holds it) is a subtree no built-in tool touches: the
file tools refuse it (directly, through a link, or renamed under them), list and search
skip it, a confined shell sees an empty folder there, and the service warns once."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from workspace_kit import Sandbox, make_caller, make_sandbox, shell_tool

from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.workspace import PinnedRoot, SandboxViolationError, builtin_tools, file_tools
from cleveragents.workspace._bwrap import bwrap_argv
from cleveragents.workspace._sandbox import open_beneath, resolve_path

SECRET = b"S3CRET-KEY-BYTES" * 2


def _state_inside(sandbox: Sandbox) -> Path:
    state = sandbox.root / ".cleveragents"
    (state / "acp").mkdir(parents=True)
    (state / "secret.key").write_bytes(SECRET)
    (state / "acp" / "s1.json").write_text('{"mode": "supervised"}')
    (sandbox.root / "into-state").symlink_to(state)
    return state


def _contents(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_the_file_tools_neither_read_nor_write_the_state_dir(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    state = _state_inside(sandbox)
    before = _contents(state)
    call = make_caller(file_tools(), sandbox.root)
    with PinnedRoot.open(str(sandbox.root), [str(state)]).activate():
        for name, arguments in (
            ("builtin/file-read", {"path": ".cleveragents/secret.key"}),
            ("builtin/file-read", {"path": str(state / "acp" / "s1.json")}),
            ("builtin/file-write", {"path": ".cleveragents/acp/planted.json", "content": "{}"}),
            ("builtin/file-write", {"path": "into-state/acp/s1.json", "content": "{}"}),
            ("builtin/file-edit", {"path": ".cleveragents/acp/s1.json",
                                   "old_text": "supervised", "new_text": "full-auto"}),
            ("builtin/file-list", {"path": ".cleveragents"}),
            ("builtin/file-search", {"pattern": "S3CRET", "path": "into-state"}),
        ):  # fmt: skip
            with pytest.raises(SandboxViolationError) as info:
                call(name, **arguments)
            assert "the daemon's state dir" in info.value.message
            assert info.value.code == SandboxViolationError.code
        listed = call("builtin/file-list", pattern="**")["entries"]
        assert listed
        assert not any(".cleveragents" in entry for entry in listed)
        assert call("builtin/file-search", pattern="S3CRET")["matches"] == []
        call("builtin/file-write", path="notes.txt", content="the rest of the root works")
    assert _contents(state) == before
    assert (sandbox.root / "notes.txt").read_text() == "the rest of the root works"


def test_the_state_dir_renamed_under_an_open_is_still_refused(tmp_path: Path) -> None:
    """A path resolved before the state dir was renamed to it (by a command beside the
    call) still cannot open inside it: the walk knows the folder by its inode."""
    sandbox = make_sandbox(tmp_path)
    state = _state_inside(sandbox)
    with PinnedRoot.open(str(sandbox.root), [str(state)]).activate():
        real = resolve_path(str(sandbox.root), "renamed/acp/planted.json", for_write=True)
        state.rename(sandbox.root / "renamed")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        with pytest.raises(SandboxViolationError, match="state dir"):
            open_beneath(os.path.realpath(sandbox.root), real, flags, shown="renamed/…")
    assert not (sandbox.root / "renamed" / "acp" / "planted.json").exists()


def test_outside_a_pin_that_names_it_the_state_dir_is_an_ordinary_folder(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    _state_inside(sandbox)
    call = make_caller(file_tools(), sandbox.root)
    with PinnedRoot.open(str(sandbox.root), [str(tmp_path / "elsewhere")]).activate():
        assert call("builtin/file-read", path=".cleveragents/acp/s1.json")["content"]


def test_bwrap_covers_the_state_dir_after_binding_the_root() -> None:
    argv = bwrap_argv("bwrap", ["--ro-bind", "/", "/"], "/ws", "true", hidden=["/ws/.state"])
    bind, cover = argv.index("--bind"), argv.index("--tmpfs")
    assert bind < cover  # later mounts win: the cover hides what the root's bind shows
    assert argv[cover : cover + 2] == ["--tmpfs", "/ws/.state"]


def test_a_confined_shell_neither_sees_nor_changes_the_state_dir(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    state = _state_inside(sandbox)
    before = _contents(state)
    call = make_caller([shell_tool("bwrap", sandbox).spec()], sandbox.root)
    command = (
        "ls -A .cleveragents; cat .cleveragents/secret.key; "
        "mkdir -p .cleveragents/acp && echo '{}' > .cleveragents/acp/planted.json; "
        "echo '{}' > into-state/planted.json; echo done"
    )
    with PinnedRoot.open(str(sandbox.root), [str(state)]).activate():
        output = call("builtin/shell", command=command)
    assert "done" in output["stdout"]
    assert SECRET.decode() not in output["stdout"]
    assert "secret.key" not in output["stdout"]
    assert _contents(state) == before


async def test_a_run_whose_root_holds_the_state_dir_warns_once_and_cannot_touch_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    state = root / ".cleveragents"
    settings = RunSettings(state_dir=state, workspace_folders=(str(root),))
    with caplog.at_level(logging.WARNING, logger="cleveragents.runs"):
        service = RunService(settings, builtin_tools())
        turns: list[dict[str, Any]] = [
            {"toolCalls": [
                {"name": "builtin/file-write",
                 "arguments": {"path": ".cleveragents/acp/planted.json", "content": "{}"}},
                {"name": "builtin/file-read", "arguments": {"path": ".cleveragents/secret.key"}},
            ]},
            {"content": "done"},
        ]  # fmt: skip
        for run_id in ("r1", "r2"):
            handle = await service.start(RunRequest(
                prompt="go", run_id=run_id, automation_profile="full-auto",
                model={"provider": "scripted", "script": turns},
            ))  # fmt: skip
            result = await handle.result()
            assert [r.success for r in result.tool_call_history] == [False, False]
            assert all("state dir" in str(r.error) for r in result.tool_call_history)
        await service.aclose()
    warnings = [r for r in caplog.records if "lies inside the sandbox root" in r.getMessage()]
    assert len(warnings) == 1
    assert not (state / "acp" / "planted.json").exists()
