"""resolve_path, open_beneath and check_pattern: the one place paths are confined."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from workspace_kit import Sandbox

from cleveragents.workspace import SandboxViolationError, WorkspaceToolError, resolve_path
from cleveragents.workspace._errors import show
from cleveragents.workspace._pinned import real_root
from cleveragents.workspace._sandbox import check_pattern, open_beneath, sandbox_root

CODE = SandboxViolationError.code


def refusal(root: Path, user_path: str, *, for_write: bool = False) -> str:
    with pytest.raises(SandboxViolationError) as info:
        resolve_path(str(root), user_path, for_write=for_write)
    assert info.value.code == CODE
    assert show(user_path) in info.value.message
    return info.value.message


def violation(refuse: Callable[[], object]) -> str:
    """The message of the sandbox violation ``refuse()`` raises, its code checked."""
    with pytest.raises(SandboxViolationError) as info:
        refuse()
    assert info.value.code == CODE
    return info.value.message


def test_a_relative_path_resolves_beneath_the_root(sandbox: Sandbox) -> None:
    assert resolve_path(str(sandbox.root), "sub/file.txt") == sandbox.root / "sub" / "file.txt"


def test_an_absolute_path_inside_the_root_is_accepted(sandbox: Sandbox) -> None:
    target = sandbox.root / "inside.txt"
    assert resolve_path(str(sandbox.root), str(target)) == target


def test_the_root_given_through_a_symlink_accepts_absolute_paths_in_either_form(
    sandbox: Sandbox,
) -> None:
    alias = sandbox.base / "alias"
    alias.symlink_to(sandbox.root)
    assert resolve_path(str(alias), str(alias / "inside.txt")) == sandbox.root / "inside.txt"
    assert resolve_path(str(alias), str(sandbox.root / "inside.txt")) == sandbox.root / "inside.txt"


def test_dot_dot_that_stays_inside_the_root_is_accepted(sandbox: Sandbox) -> None:
    assert resolve_path(str(sandbox.root), "sub/../inside.txt") == sandbox.root / "inside.txt"


def test_a_missing_file_resolves_so_that_it_can_be_created(sandbox: Sandbox) -> None:
    assert resolve_path(str(sandbox.root), "new/dir/f.txt", for_write=True) == (
        sandbox.root / "new" / "dir" / "f.txt"
    )


def test_a_symlink_pointing_inside_is_followed(sandbox: Sandbox) -> None:
    (sandbox.root / "alias.txt").symlink_to("sub/file.txt")
    assert resolve_path(str(sandbox.root), "alias.txt") == sandbox.root / "sub" / "file.txt"


def test_a_dot_dot_escape_names_the_rule(sandbox: Sandbox) -> None:
    assert "escapes the sandbox root" in refusal(sandbox.root, "../canary/secret.txt")


def test_an_absolute_path_outside_names_the_rule(sandbox: Sandbox) -> None:
    message = refusal(sandbox.root, str(sandbox.canary / "secret.txt"))
    assert "absolute path outside the sandbox root" in message


def test_a_sibling_sharing_the_root_as_a_prefix_is_outside(sandbox: Sandbox) -> None:
    refusal(sandbox.root, str(sandbox.evil / "evil.txt"))


def test_a_symlink_escape_names_the_rule(sandbox: Sandbox) -> None:
    (sandbox.root / "out").symlink_to(sandbox.canary / "secret.txt")
    assert "symlink pointing outside" in refusal(sandbox.root, "out")


def test_a_nul_byte_names_the_rule(sandbox: Sandbox) -> None:
    assert "NUL byte" in refusal(sandbox.root, "inside.txt\x00.png")


def test_an_overlong_path_is_refused_without_an_oserror(sandbox: Sandbox) -> None:
    assert "too long" in refusal(sandbox.root, "a/" * 2100)


def test_an_overlong_component_is_refused(sandbox: Sandbox) -> None:
    assert "component longer than 255" in refusal(sandbox.root, "x" * 256)


def test_an_empty_path_is_refused(sandbox: Sandbox) -> None:
    refusal(sandbox.root, "")


def test_a_symlink_loop_is_refused(sandbox: Sandbox) -> None:
    (sandbox.root / "a").symlink_to("b")
    (sandbox.root / "b").symlink_to("a")
    assert "symlink loop" in refusal(sandbox.root, "a")


def test_a_fifo_is_refused(sandbox: Sandbox) -> None:
    os.mkfifo(sandbox.root / "pipe")
    assert "is a FIFO" in refusal(sandbox.root, "pipe")


def test_a_hard_linked_file_is_refused_for_writing_only(sandbox: Sandbox) -> None:
    os.link(sandbox.canary / "secret.txt", sandbox.root / "hl")
    assert resolve_path(str(sandbox.root), "hl") == sandbox.root / "hl"
    assert "2 hard links" in refusal(sandbox.root, "hl", for_write=True)


def test_a_long_path_is_shown_abbreviated() -> None:
    shown = show("b" * 500)
    assert shown.startswith("'bbbb")
    assert "500 characters" in shown
    assert len(shown) < 140


def test_a_relative_sandbox_root_is_refused() -> None:
    assert show("relative/root") in violation(lambda: real_root("relative/root"))


def test_a_missing_sandbox_root_is_refused(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    assert show(missing) in violation(lambda: real_root(missing))


def test_inputs_without_a_sandbox_root_are_refused() -> None:
    violation(lambda: sandbox_root({"path": "x"}))


def test_open_beneath_refuses_a_parent_that_became_a_symlink_after_resolution(
    sandbox: Sandbox,
) -> None:
    resolved = resolve_path(str(sandbox.root), "sub/file.txt")
    (sandbox.root / "sub").rename(sandbox.root / "sub-old")
    (sandbox.root / "sub").symlink_to(sandbox.canary)
    (sandbox.canary / "file.txt").write_text("outside\n")
    message = violation(
        lambda: open_beneath(str(sandbox.root), resolved, os.O_RDONLY, shown="'sub/file.txt'")
    )
    assert "'sub/file.txt'" in message


def test_open_beneath_refuses_a_file_that_became_a_symlink_after_resolution(
    sandbox: Sandbox,
) -> None:
    resolved = resolve_path(str(sandbox.root), "new.txt", for_write=True)
    (sandbox.root / "new.txt").symlink_to(sandbox.canary / "created.txt")
    flags = os.O_WRONLY | os.O_CREAT
    message = violation(lambda: open_beneath(str(sandbox.root), resolved, flags, shown="'new.txt'"))
    assert "'new.txt'" in message
    assert not (sandbox.canary / "created.txt").exists()


def test_open_beneath_creates_missing_parents_inside_the_root(sandbox: Sandbox) -> None:
    resolved = resolve_path(str(sandbox.root), "a/b/c.txt", for_write=True)
    fd = open_beneath(
        str(sandbox.root),
        resolved,
        os.O_WRONLY | os.O_CREAT,
        shown="'a/b/c.txt'",
        create_parents=True,
    )
    os.close(fd)
    assert (sandbox.root / "a" / "b" / "c.txt").is_file()


def test_check_pattern_refuses_dot_dot_segments(sandbox: Sandbox) -> None:
    for pattern in ("../*", "**/../..", "sub/../../x"):
        with pytest.raises(SandboxViolationError) as info:
            check_pattern(str(sandbox.root), pattern)
        assert show(pattern) in info.value.message


def test_check_pattern_refuses_absolute_patterns_outside(sandbox: Sandbox) -> None:
    assert show("/etc/*") in violation(lambda: check_pattern(str(sandbox.root), "/etc/*"))


def test_check_pattern_makes_an_absolute_pattern_inside_relative(sandbox: Sandbox) -> None:
    assert check_pattern(str(sandbox.root), f"{sandbox.root}/sub/*.txt") == "sub/*.txt"


def test_check_pattern_keeps_dots_inside_names(sandbox: Sandbox) -> None:
    assert check_pattern(str(sandbox.root), "..hidden/*..txt") == "..hidden/*..txt"


def test_a_workspace_tool_error_is_a_tool_error() -> None:
    from cleveragents.tool import ToolError

    assert issubclass(WorkspaceToolError, ToolError)
