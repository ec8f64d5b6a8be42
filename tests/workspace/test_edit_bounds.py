"""file-edit caps its result, not only its input: edits cannot amplify a file."""

from __future__ import annotations

import pytest
from workspace_kit import Sandbox, make_caller

from cleveragents.workspace import WorkspaceLimits, WorkspaceToolError
from cleveragents.workspace.files import file_tools

CAP = 1024 * 1024


def test_four_small_edits_cannot_grow_a_file_past_the_write_cap(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_write_bytes=CAP)), sandbox.root)
    call("builtin/file-write", path="amp.txt", content="a" * 100)
    sent = 100
    refused = 0
    for _ in range(4):
        before = (sandbox.root / "amp.txt").read_bytes()
        new_text = "a" * 2400  # each call: under 2,500 characters of arguments
        sent += 1 + len(new_text)
        try:
            call("builtin/file-edit", path="amp.txt", old_text="a", new_text=new_text,
                 replace_all=True)  # fmt: skip
        except WorkspaceToolError:
            refused += 1
            assert (sandbox.root / "amp.txt").read_bytes() == before  # untouched
        assert (sandbox.root / "amp.txt").stat().st_size <= CAP
    assert sent < 10_000
    assert refused >= 1


def test_a_replace_all_with_a_huge_count_is_refused_and_leaves_the_file(
    sandbox: Sandbox,
) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_write_bytes=CAP)), sandbox.root)
    original = "x\n" * 200_000
    (sandbox.root / "many.txt").write_text(original)
    with pytest.raises(WorkspaceToolError) as info:
        call("builtin/file-edit", path="many.txt", old_text="x", new_text="y" * 50,
             replace_all=True)  # fmt: skip
    assert "many.txt" in info.value.message
    assert (sandbox.root / "many.txt").read_text() == original


def test_an_edit_that_stays_under_the_cap_still_works(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_write_bytes=CAP)), sandbox.root)
    (sandbox.root / "ok.txt").write_text("one two one\n")
    result = call("builtin/file-edit", path="ok.txt", old_text="one", new_text="three",
                  replace_all=True)  # fmt: skip
    assert result["replacements"] == 2
    assert (sandbox.root / "ok.txt").read_text() == "three two three\n"
