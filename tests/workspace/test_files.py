"""The five file tools: happy paths, each error, caps, schemas, .gitignore."""

from __future__ import annotations

import asyncio
import os
import random
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from workspace_kit import Caller, Sandbox, make_caller

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import (
    ToolActorContext,
    ToolCallingRuntime,
    ToolInputError,
    ToolRegistry,
    ToolRunner,
)
from cleveragents.workspace import (
    SandboxViolationError,
    WorkspaceLimits,
    WorkspaceToolError,
    builtin_tools,
)
from cleveragents.workspace._file_search import file_search
from cleveragents.workspace._globs import GitIgnore
from cleveragents.workspace._patterns import (
    UnsafeGlobError,
    UnsupportedPatternError,
    glob_to_regex,
)
from cleveragents.workspace._stop import StopFlag, _Stopped, run_stoppable
from cleveragents.workspace.files import file_tools
from kit.rawpeer import RawDaemon

# ----------------------------------------------------------------------------- schemas


def test_every_file_tool_schema_is_closed_and_hides_the_reserved_keys() -> None:
    for spec in file_tools():
        params = spec.schema.parameters
        assert params["additionalProperties"] is False
        assert "sandbox_root" not in params["properties"]
        assert spec.output_schema is not None


def test_the_argument_names_are_the_contracted_snake_case_ones() -> None:
    properties = {spec.name: set(spec.schema.parameters["properties"]) for spec in file_tools()}
    assert properties == {
        "builtin/file-read": {"path", "start_line", "end_line"},
        "builtin/file-write": {"path", "content"},
        "builtin/file-edit": {"path", "old_text", "new_text", "replace_all"},
        "builtin/file-list": {"pattern", "path"},
        "builtin/file-search": {"pattern", "glob", "path"},
    }


def test_kinds_follow_the_annotations() -> None:
    kinds = {spec.name: spec.kind for spec in builtin_tools()}
    assert kinds == {
        "builtin/file-read": "read",
        "builtin/file-write": "write",
        "builtin/file-edit": "write",
        "builtin/file-list": "read",
        "builtin/file-search": "read",
        "builtin/shell": "execute",
    }


def test_an_unknown_argument_is_rejected_by_the_schema(call: Caller) -> None:
    with pytest.raises(ToolInputError):
        call("builtin/file-read", path="inside.txt", encoding="latin-1")


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_read_bytes"):
        WorkspaceLimits(max_read_bytes=0)


# ----------------------------------------------------------------------------- file-read


def test_read_returns_the_whole_file_and_its_line_count(call: Caller, sandbox: Sandbox) -> None:
    assert call("builtin/file-read", path="sub/file.txt") == {
        "path": sandbox.at("sub/file.txt"),
        "content": "sub file\n",
        "start_line": 1,
        "end_line": 1,
        "total_lines": 1,
        "truncated": False,
    }


def test_read_returns_an_inclusive_one_based_line_range(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "lines.txt").write_text("".join(f"line {i}\r\n" for i in range(1, 11)))
    result = call("builtin/file-read", path="lines.txt", start_line=3, end_line=5)
    assert result["content"] == "line 3\r\nline 4\r\nline 5\r\n"
    assert (result["start_line"], result["end_line"], result["truncated"]) == (3, 5, False)


def test_read_of_an_absolute_path_inside_reports_the_same_path(
    call: Caller, sandbox: Sandbox
) -> None:
    path = sandbox.at("inside.txt")
    assert call("builtin/file-read", path=path)["path"] == path


def test_output_paths_are_absolute_in_the_real_root_when_the_root_is_a_symlink(
    sandbox: Sandbox,
) -> None:
    alias = sandbox.base / "alias"
    alias.symlink_to(sandbox.root)
    call = make_caller(file_tools(), alias)
    real = os.path.realpath(sandbox.root)
    assert call("builtin/file-read", path="inside.txt")["path"] == f"{real}/inside.txt"
    assert call("builtin/file-write", path="w.txt", content="w")["path"] == f"{real}/w.txt"
    assert call("builtin/file-list", pattern="sub/*")["entries"] == [f"{real}/sub/file.txt"]
    [hit] = call("builtin/file-search", pattern="sub file")["matches"]
    assert hit["path"] == f"{real}/sub/file.txt"


def test_read_of_an_empty_file_returns_no_text(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "empty").write_text("")
    result = call("builtin/file-read", path="empty")
    assert (result["content"], result["total_lines"]) == ("", 0)


def test_read_past_the_end_fails_with_the_line_count(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match=r"start_line 5 is past the end .*\(1 lines\)"):
        call("builtin/file-read", path="inside.txt", start_line=5)


def test_read_with_end_before_start_fails(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match="end_line 1 is before start_line 2"):
        call("builtin/file-read", path="inside.txt", start_line=2, end_line=1)


def test_read_with_line_zero_is_rejected_by_the_schema(call: Caller) -> None:
    with pytest.raises(ToolInputError):
        call("builtin/file-read", path="inside.txt", start_line=0)


def test_read_of_a_binary_file_fails_clearly(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    with pytest.raises(WorkspaceToolError, match=re.escape("'image.png' looks binary")):
        call("builtin/file-read", path="image.png")


def test_read_of_invalid_utf8_fails_clearly(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "latin1.txt").write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(WorkspaceToolError, match=r"not UTF-8 text .*line 2"):
        call("builtin/file-read", path="latin1.txt")


def test_read_of_a_directory_fails(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match="'sub' is a directory"):
        call("builtin/file-read", path="sub")


def test_read_of_a_missing_file_names_it(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match=re.escape("'nope.txt' does not exist")):
        call("builtin/file-read", path="nope.txt")


def test_read_over_the_cap_is_truncated_at_a_line_and_says_where_to_continue(
    sandbox: Sandbox,
) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_read_bytes=21)), sandbox.root)
    (sandbox.root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 100)))
    result = call("builtin/file-read", path="big.txt")
    assert result["content"] == "line 1\nline 2\nline 3\n"
    assert result["truncated"] is True
    assert result["total_lines"] is None
    assert "start_line=4" in result["note"]


def test_read_of_a_line_longer_than_the_cap_returns_its_start(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_read_bytes=5)), sandbox.root)
    (sandbox.root / "wide.txt").write_text("ééééé\nnext\n")
    result = call("builtin/file-read", path="wide.txt")
    assert result["content"] == "éé"
    assert (result["end_line"], result["truncated"]) == (1, True)
    assert "line 1 was cut" in result["note"]
    assert "start_line=2" in result["note"]


def test_read_counts_lines_past_a_line_longer_than_the_cap(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_read_bytes=100)), sandbox.root)
    (sandbox.root / "minified.js").write_text("x" * 1_000_000 + "\nsecond\n")
    assert call("builtin/file-read", path="minified.js")["content"] == "x" * 100
    result = call("builtin/file-read", path="minified.js", start_line=2)
    assert (result["content"], result["total_lines"]) == ("second\n", 2)


# ----------------------------------------------------------------------------- file-write


def test_write_creates_a_file_and_its_parent_directories(call: Caller, sandbox: Sandbox) -> None:
    result = call("builtin/file-write", path="new/deep/f.txt", content="héllo\n")
    assert result == {"path": sandbox.at("new/deep/f.txt"), "bytes_written": 7, "created": True}
    assert (sandbox.root / "new" / "deep" / "f.txt").read_text() == "héllo\n"


def test_write_overwrites_an_existing_file(call: Caller, sandbox: Sandbox) -> None:
    result = call("builtin/file-write", path="inside.txt", content="new")
    assert result == {"path": sandbox.at("inside.txt"), "bytes_written": 3, "created": False}
    assert (sandbox.root / "inside.txt").read_text() == "new"


def test_write_through_a_symlink_inside_writes_its_target(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "alias").symlink_to("sub/file.txt")
    result = call("builtin/file-write", path="alias", content="x")
    assert result["path"] == sandbox.at("sub/file.txt")
    assert (sandbox.root / "sub" / "file.txt").read_text() == "x"


def test_write_over_the_cap_fails_before_touching_the_file(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_write_bytes=3)), sandbox.root)
    with pytest.raises(
        WorkspaceToolError, match=re.escape("'inside.txt' is 4 bytes; the limit is 3")
    ):
        call("builtin/file-write", path="inside.txt", content="abcd")
    assert (sandbox.root / "inside.txt").read_text() == "inside\n"


def test_write_to_a_directory_fails(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match="'sub' is a directory"):
        call("builtin/file-write", path="sub", content="x")


def test_write_under_a_file_fails(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match=re.escape("inside.txt/x")):
        call("builtin/file-write", path="inside.txt/x", content="x")


# ----------------------------------------------------------------------------- file-edit


def test_edit_replaces_a_unique_occurrence(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "code.py").write_text("a = 1\nb = 2\n")
    result = call("builtin/file-edit", path="code.py", old_text="b = 2", new_text="b = 3")
    assert result == {"path": sandbox.at("code.py"), "replacements": 1}
    assert (sandbox.root / "code.py").read_text() == "a = 1\nb = 3\n"


def test_edit_fails_when_old_text_is_missing(call: Caller) -> None:
    with pytest.raises(
        WorkspaceToolError, match=re.escape("old_text was not found in 'inside.txt'")
    ):
        call("builtin/file-edit", path="inside.txt", old_text="absent", new_text="x")


def test_edit_fails_when_old_text_is_ambiguous(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "dup.txt").write_text("x x x")
    with pytest.raises(WorkspaceToolError, match=r"occurs 3 times .*replace_all=true"):
        call("builtin/file-edit", path="dup.txt", old_text="x", new_text="y")
    assert (sandbox.root / "dup.txt").read_text() == "x x x"


def test_edit_with_replace_all_replaces_every_occurrence(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "dup.txt").write_text("x x x")
    result = call(
        "builtin/file-edit", path="dup.txt", old_text="x", new_text="yy", replace_all=True
    )
    assert result == {"path": sandbox.at("dup.txt"), "replacements": 3}
    assert (sandbox.root / "dup.txt").read_text() == "yy yy yy"


def test_edit_with_identical_texts_fails(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match="identical"):
        call("builtin/file-edit", path="inside.txt", old_text="inside", new_text="inside")


def test_edit_with_empty_old_text_is_rejected_by_the_schema(call: Caller) -> None:
    with pytest.raises(ToolInputError):
        call("builtin/file-edit", path="inside.txt", old_text="", new_text="x")


def test_edit_of_a_missing_file_names_it(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match=re.escape("'gone.txt' does not exist")):
        call("builtin/file-edit", path="gone.txt", old_text="a", new_text="b")


def test_edit_of_a_binary_file_fails(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "bin").write_bytes(b"a\x00b")
    with pytest.raises(WorkspaceToolError, match="looks binary"):
        call("builtin/file-edit", path="bin", old_text="a", new_text="b")


def test_edit_of_a_file_over_the_cap_fails(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_write_bytes=3)), sandbox.root)
    with pytest.raises(WorkspaceToolError, match="edit limit is 3"):
        call("builtin/file-edit", path="inside.txt", old_text="in", new_text="out")


# ----------------------------------------------------------------------------- globbing


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "src/deep/a.py", True),
        ("src/**", "src/x/y", True),
        ("src/**", "srcx/y", False),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("[!x]*", "y1", True),
        ("[!x]*", "x1", False),
        ("file[0-9].txt", "file7.txt", True),
        ("a[", "a[", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
    ],
)
def test_glob_translation(pattern: str, path: str, matches: bool) -> None:
    assert (re.fullmatch(glob_to_regex(pattern), path) is not None) is matches


def test_gitignore_rules_follow_git_precedence() -> None:
    ignore = GitIgnore()
    for line in ["# comment", "", "*.log", "!keep.log", "/top.txt", "build/", "docs/*.tmp"]:
        ignore._add(line, "")
    assert ignore.ignored("a/b/x.log", False)
    assert not ignore.ignored("keep.log", False)
    assert ignore.ignored("top.txt", False)
    assert not ignore.ignored("sub/top.txt", False)
    assert ignore.ignored("sub/build", True)
    assert not ignore.ignored("build", False)
    assert ignore.ignored("docs/a.tmp", False)
    assert not ignore.ignored("other/docs/a.tmp", False)


# ----------------------------------------------------------------------------- file-list


@pytest.fixture
def tree(sandbox: Sandbox) -> Path:
    root = sandbox.root
    for rel in ["src/a.py", "src/b.txt", "src/pkg/c.py", "build/out.o", "app.log", "keep.log"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{rel}\n")
    (root / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    (root / "src" / ".gitignore").write_text("b.txt\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref\n")
    return root


def test_list_defaults_to_the_direct_children_with_directories_marked(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    assert call("builtin/file-list")["entries"] == [
        sandbox.at(".gitignore"),
        sandbox.at("inside.txt"),
        sandbox.at("keep.log"),
        sandbox.at("src/"),
        sandbox.at("sub/"),
    ]


def test_list_with_a_recursive_pattern_skips_ignored_entries(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    assert call("builtin/file-list", pattern="**/*.py") == {
        "entries": [sandbox.at("src/a.py"), sandbox.at("src/pkg/c.py")],
        "truncated": False,
    }


def test_list_with_a_trailing_slash_lists_directories_only(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    assert call("builtin/file-list", pattern="**/")["entries"] == [
        sandbox.at("src/"),
        sandbox.at("src/pkg/"),
        sandbox.at("sub/"),
    ]


def test_list_beneath_a_path_matches_relative_to_it_and_reports_absolute_paths(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    assert call("builtin/file-list", path="src", pattern="*")["entries"] == [
        sandbox.at("src/.gitignore"),
        sandbox.at("src/a.py"),
        sandbox.at("src/pkg/"),
    ]


def test_list_accepts_an_absolute_pattern_inside_the_root(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    assert call("builtin/file-list", pattern=f"{tree}/src/*.py")["entries"] == [
        sandbox.at("src/a.py")
    ]


def test_list_accepts_an_absolute_path_inside_the_root(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    assert call("builtin/file-list", path=sandbox.at("src/pkg"))["entries"] == [
        sandbox.at("src/pkg/c.py")
    ]


def test_list_does_not_descend_into_a_symlinked_directory(call: Caller, sandbox: Sandbox) -> None:
    (sandbox.root / "linked").symlink_to("sub")
    entries = call("builtin/file-list", pattern="**")["entries"]
    assert sandbox.at("linked") in entries
    assert not any(e.startswith(sandbox.at("linked/")) for e in entries)


def test_list_over_the_cap_is_truncated_with_a_note(sandbox: Sandbox, tree: Path) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_list_results=2)), sandbox.root)
    result = call("builtin/file-list", pattern="**")
    assert len(result["entries"]) == 2
    assert result["truncated"] is True
    assert "first 2 entries" in result["note"]


def test_list_stops_walking_at_the_walk_cap(sandbox: Sandbox, tree: Path) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_walk_entries=3)), sandbox.root)
    result = call("builtin/file-list", pattern="**")
    assert result["truncated"] is True
    assert "walk stopped" in result["note"]


def test_list_of_a_missing_directory_names_it(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match="'nowhere' does not exist"):
        call("builtin/file-list", path="nowhere")


def test_list_of_a_file_fails(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match=re.escape("'inside.txt' is not a directory")):
        call("builtin/file-list", path="inside.txt")


def test_list_with_both_an_absolute_pattern_and_a_path_fails(call: Caller, tree: Path) -> None:
    with pytest.raises(WorkspaceToolError, match="omit path"):
        call("builtin/file-list", path="src", pattern=f"{tree}/src/*")


# ----------------------------------------------------------------------------- file-search


def test_search_returns_path_line_and_text_per_matching_line(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    (tree / "src" / "a.py").write_text("import os\n\ndef main():\n    return os.name\n")
    assert call("builtin/file-search", pattern=r"\bos\b", glob="*.py")["matches"] == [
        {"path": sandbox.at("src/a.py"), "line": 1, "text": "import os"},
        {"path": sandbox.at("src/a.py"), "line": 4, "text": "    return os.name"},
    ]


def test_search_skips_gitignored_binary_and_symlinked_files(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    (tree / "blob.bin").write_bytes(b"needle\x00")
    (tree / "linked.txt").symlink_to("src/a.py")
    (tree / "src" / "a.py").write_text("needle\n")
    (tree / "app.log").write_text("needle\n")
    hits = call("builtin/file-search", pattern="needle")["matches"]
    assert [hit["path"] for hit in hits] == [sandbox.at("src/a.py")]


def test_search_of_one_file(call: Caller, sandbox: Sandbox) -> None:
    assert call("builtin/file-search", pattern="sub", path="sub/file.txt")["matches"] == [
        {"path": sandbox.at("sub/file.txt"), "line": 1, "text": "sub file"}
    ]


def test_search_beneath_an_absolute_path_reports_absolute_paths(
    call: Caller, sandbox: Sandbox
) -> None:
    hits = call("builtin/file-search", pattern="file", path=sandbox.at("sub"))["matches"]
    assert hits == [{"path": sandbox.at("sub/file.txt"), "line": 1, "text": "sub file"}]


def test_search_with_a_path_glob_matches_relative_to_the_path(
    call: Caller, sandbox: Sandbox, tree: Path
) -> None:
    hits = call("builtin/file-search", pattern="py", path="src", glob="pkg/*.py")["matches"]
    assert [hit["path"] for hit in hits] == [sandbox.at("src/pkg/c.py")]


def test_search_with_an_invalid_regex_fails_naming_it(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match=r"pattern 'a\(' is not a valid regex"):
        call("builtin/file-search", pattern="a(")


def test_search_over_the_cap_is_truncated_with_a_note(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_search_results=3)), sandbox.root)
    (sandbox.root / "many.txt").write_text("hit\n" * 10)
    result = call("builtin/file-search", pattern="hit")
    assert len(result["matches"]) == 3
    assert result["truncated"] is True
    assert "first 3 matches" in result["note"]


def test_search_cuts_long_lines(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_line_chars=10)), sandbox.root)
    (sandbox.root / "long.txt").write_text("x" * 50 + "\n")
    [hit] = call("builtin/file-search", pattern="x")["matches"]
    assert hit["text"] == "x" * 10 + "…[line truncated]"


def test_search_skips_files_over_the_size_cap(sandbox: Sandbox) -> None:
    call = make_caller(file_tools(WorkspaceLimits(max_search_file_bytes=4)), sandbox.root)
    (sandbox.root / "big.txt").write_text("needle\n")
    assert call("builtin/file-search", pattern="needle")["matches"] == []


def test_search_of_a_missing_path_names_it(call: Caller) -> None:
    with pytest.raises(WorkspaceToolError, match="'gone' does not exist"):
        call("builtin/file-search", pattern="x", path="gone")


def test_search_refuses_a_glob_reaching_outside(call: Caller) -> None:
    with pytest.raises(SandboxViolationError) as info:
        call("builtin/file-search", pattern="x", glob="../*")
    assert info.value.code == SandboxViolationError.code
    assert "glob '../*'" in info.value.message  # named as the model gave it


def test_absolute_paths_under_a_symlinked_root_as_given_are_accepted(tmp_path: Path) -> None:
    from cleveragents.workspace import builtin_tools

    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("alpha\n")
    link = tmp_path / "link"
    link.symlink_to(real)
    tools = {spec.name: spec for spec in builtin_tools()}
    inputs = {"path": str(link / "a.txt"), "sandbox_root": str(link), "resource_bindings": {}}
    read = tools["builtin/file-read"].handler(inputs)
    assert read["path"] == str(real.resolve() / "a.txt")  # type: ignore[index]
    written = tools["builtin/file-write"].handler({**inputs, "content": "beta\n"})
    assert written["path"] == str(real.resolve() / "a.txt")  # type: ignore[index]
    assert (real / "a.txt").read_text() == "beta\n"


# ----------------------------------------------------------------------------- hostile patterns
# Inputs that froze the daemon when patterns ran on Python's backtracking re
# (``docs/security.md`` §2.1).
# A regression takes minutes; pytest's per-test timeout makes it a failure.

TWELVE_STARS = "*a" * 11 + "*b"  # *a*a*a*a*a*a*a*a*a*a*a*b


def test_search_with_a_nested_quantifier_on_a_long_line_of_as_finishes(
    call: Caller, sandbox: Sandbox
) -> None:
    (sandbox.root / "as.txt").write_text(("a" * 34 + "!\n") * 50 + "a" * 34 + "\n")
    assert call("builtin/file-search", pattern="(a+)+$", path="as.txt")["matches"] == [
        {"path": sandbox.at("as.txt"), "line": 51, "text": "a" * 34}
    ]


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [(r"(\w)\1", "backreference"), (r"foo(?=bar)", "lookahead"), (r"(?<!x)y", "lookbehind")],
)
def test_search_refuses_what_re2_cannot_run_naming_the_construct(
    call: Caller, pattern: str, construct: str
) -> None:
    with pytest.raises(UnsupportedPatternError) as caught:
        call("builtin/file-search", pattern=pattern)
    assert construct in caught.value.message


def test_a_refused_pattern_in_a_run_is_a_failed_record_naming_the_construct(
    sandbox: Sandbox,
) -> None:
    registry = ToolRegistry()
    for spec in file_tools():
        registry.register(spec)
    turns: list[dict[str, Any]] = [
        {"toolCalls": [{"name": "builtin/file-search", "arguments": {"pattern": "(?=x)"}}]},
        {"content": "done"},
    ]
    runtime = ToolCallingRuntime(
        registry=registry, runner=ToolRunner(registry), llm_caller=ScriptedModel(turns)
    )
    context = ToolActorContext(sandbox_root=str(sandbox.root))
    result = asyncio.run(asyncio.wait_for(runtime.arun_tool_loop("go", context), 30))
    [record] = result.tool_call_history
    assert record.success is False
    assert record.error is not None
    assert "lookahead" in record.error


def test_list_with_a_twelve_star_pattern_against_forty_character_names_answers(
    call: Caller, sandbox: Sandbox
) -> None:
    (sandbox.root / ("a" * 40)).write_text("")
    (sandbox.root / ("a" * 39 + "b")).write_text("")
    assert call("builtin/file-list", pattern=TWELVE_STARS)["entries"] == [
        sandbox.at("a" * 39 + "b")
    ]


def test_search_with_a_twelve_star_glob_against_forty_character_names_answers(
    call: Caller, sandbox: Sandbox
) -> None:
    (sandbox.root / "sub" / ("a" * 40)).write_text("hit\n")
    (sandbox.root / "sub" / ("a" * 39 + "b")).write_text("hit\n")
    hits = call("builtin/file-search", pattern="hit", glob=TWELVE_STARS)["matches"]
    assert hits == [{"path": sandbox.at("sub/" + "a" * 39 + "b"), "line": 1, "text": "hit"}]


def test_a_glob_too_long_to_match_safely_is_refused(call: Caller) -> None:
    # Each segment within NAME_MAX, so the path checks let it through to the glob cap.
    with pytest.raises(UnsafeGlobError, match="longer than"):
        call("builtin/file-list", pattern="/".join(["*a" * 100] * 10))


def test_a_hostile_gitignore_line_is_skipped_and_noted_and_a_plain_list_answers(
    call: Caller, sandbox: Sandbox
) -> None:
    (sandbox.root / ".gitignore").write_text(f"*.log\n{'*a' * 600}b\n{TWELVE_STARS}\n")
    (sandbox.root / "app.log").write_text("")
    (sandbox.root / ("a" * 40)).write_text("")
    (sandbox.root / ("a" * 39 + "b")).write_text("")
    result = call("builtin/file-list")
    assert result["entries"] == [
        sandbox.at(".gitignore"),
        sandbox.at("a" * 40),
        sandbox.at("inside.txt"),
        sandbox.at("sub/"),
    ]
    assert result["truncated"] is False
    assert "'.gitignore' line 2" in result["note"]
    searched = call("builtin/file-search", pattern="never-there")
    assert "'.gitignore' line 2" in searched["note"]


def test_list_and_search_have_async_handlers() -> None:
    # Async, so the runner awaits them on the loop and a cancel reaches their worker.
    specs = {spec.name: spec for spec in file_tools()}
    assert specs["builtin/file-list"].is_async
    assert specs["builtin/file-search"].is_async


async def test_a_cancelled_search_stops_its_worker(sandbox: Sandbox) -> None:
    for index in range(8):  # enough lines that the search outlives the cancel
        (sandbox.root / f"big{index}.txt").write_bytes(b"a line without the word\n" * 150_000)
    started = threading.Event()
    workers: list[threading.Thread] = []
    outcome: list[BaseException] = []

    def work(inputs: dict[str, Any], limits: WorkspaceLimits, stop: StopFlag) -> dict[str, Any]:
        workers.append(threading.current_thread())
        started.set()
        try:
            return file_search(inputs, limits, stop)
        except Exception as exc:
            outcome.append(exc)
            raise

    inputs = {"pattern": "needle", "sandbox_root": str(sandbox.root), "resource_bindings": {}}
    task = asyncio.ensure_future(
        run_stoppable("file-search", work, inputs, WorkspaceLimits(), 60.0)
    )
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [worker] = workers
    assert worker.name == "cleveragents-file-search"
    await asyncio.to_thread(worker.join, 20)
    assert not worker.is_alive()
    assert [type(exc) for exc in outcome] == [_Stopped]  # stopped by the flag, not finished


async def test_the_daemon_answers_a_request_sent_while_a_search_runs(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    text = random.Random(0).choices(b"ab", k=1_500_000)
    for index in range(2):  # RE2 needs its slower engine for this pattern: about 1 s a file
        (workspace / f"ab{index}.txt").write_bytes(bytes(text))
    pattern = "(?:[ab]*a[ab]{18}){3}c"
    model = {"provider": "scripted", "script": [
        {"toolCalls": [{"name": "builtin/file-search", "arguments": {"pattern": pattern}}]},
        {"content": "done"},
    ]}  # fmt: skip
    daemon = await RawDaemon.start(workspace, tmp_path / "state", options={"model": model})
    try:
        daemon.send({"jsonrpc": "2.0", "id": 2, "method": "run/start",
                     "params": {"prompt": "go", "runId": "r1"}})  # fmt: skip
        while (await daemon.next(20)).get("method") != "run/toolCallStarted":
            pass
        listed = await daemon.call(3, "tools/list", {})
        assert "result" in listed
        assert not any(message.get("id") == 2 for message in daemon.messages)  # still searching
        finished = await daemon.reply_to(2, timeout=50)
        assert "result" in finished, finished
    finally:
        await daemon.kill()
