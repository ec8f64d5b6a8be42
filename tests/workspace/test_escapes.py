"""Escape attempts against every file tool, as a table.

Each attempt runs in a fresh sandbox (``ws/`` beside ``canary/`` and ``ws-evil/``, plus
the traps below) and must end as its ``expect`` says:

* ``refused``: a ``SandboxViolationError`` whose message names the value as given;
* ``fails``: a tool error naming it (a literal ``%2e%2e`` or ``~`` is just a missing name);
* ``contained``: success, with the effect provably inside the root;
* ``no_leak``: success, with nothing from outside in the output;
* ``safe``: either of the first two or success: used where the shell's own power
  differs between modes.

In every case the tree outside the root is byte-for-byte unchanged and no error message
carries canary text; on ``contained`` and ``no_leak`` every path in the output is
absolute and inside the real root (``client-protocol/PROTOCOL.md`` §15). Attempts whose
trap is planted by ``builtin/shell`` run twice: under bwrap and unconfined.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from workspace_kit import Caller, Sandbox, make_caller, shell_tool

from cleveragents.tool import CleverAgentsError
from cleveragents.workspace import (
    PinnedRoot,
    SandboxViolationError,
    _file_edit,
    _file_read,
    _file_write,
    _walk,
    builtin_tools,
)
from cleveragents.workspace._errors import show

READ, WRITE, EDIT = "builtin/file-read", "builtin/file-write", "builtin/file-edit"
LIST, SEARCH = "builtin/file-list", "builtin/file-search"
LEAK_MARKERS = ("CANARY", "secret.txt", "deep.txt", "evil.txt", "root:x:0")


def plant_traps(sb: Sandbox) -> None:
    """Symlinks and special files planted in the root before each attempt."""
    root = sb.root
    links = {
        "link_out": "../canary/secret.txt",
        "abs_link": f"{sb.canary}/secret.txt",
        "chain1": "chain2",
        "chain2": "sub/chain3",
        "sub/chain3": "../../canary/secret.txt",
        "dirlink": "../canary",
        "sub/up": "../../canary",
        "dangling_out": "../canary/new.txt",
        "dangling_abs": f"{sb.canary}/created.txt",
        "dangling_dir": "../canary/newdir",
        "evil_link": "../ws-evil",
        "loop_a": "loop_b",
        "loop_b": "loop_a",
        "etc_link": "/etc/passwd",
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    os.mkfifo(root / "pipe")


def hard_link(sb: Sandbox) -> None:
    os.link(sb.canary / "secret.txt", sb.root / "hardlink")


def device_node(sb: Sandbox) -> None:
    try:
        os.mknod(sb.root / "devnode", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD, which this test process lacks")


def unix_socket(sb: Sandbox) -> None:
    cwd = os.getcwd()
    os.chdir(sb.root)  # a relative bind keeps us under the 108-byte AF_UNIX path limit
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind("sock")
    finally:
        os.chdir(cwd)


def literal_file(rel: str) -> Callable[[Sandbox, Any], None]:
    def check(sb: Sandbox, output: Any) -> None:
        assert (sb.root / rel).is_file()
        assert output["path"] == sb.at(rel)

    return check


@attrs.frozen
class Attempt:
    id: str
    tool: str
    args: dict[str, Any]
    expect: str = "refused"
    names: str = "path"  # the argument the error must name
    setup: Callable[[Sandbox], None] | None = None
    shell: str | None = None  # a command run through builtin/shell to plant the trap
    check: Callable[[Sandbox, Any], None] | None = None

    def param(self) -> Any:
        return pytest.param(self, id=self.id)


LONG_PATH = "a/" * 2100 + "x"
LONG_NAME = "x" * 300

ATTEMPTS = [
    # ------------------------------------------------------------------ file-read
    Attempt("read-dotdot", READ, {"path": "../canary/secret.txt"}),
    Attempt("read-dotdot-deep", READ, {"path": "../../../../../../../../etc/passwd"}),
    Attempt("read-inner-dotdot", READ, {"path": "sub/../../canary/secret.txt"}),
    Attempt("read-dot-prefix", READ, {"path": "./../canary/secret.txt"}),
    Attempt("read-abs-outside", READ, {"path": "{canary}/secret.txt"}),
    Attempt("read-abs-etc", READ, {"path": "/etc/passwd"}),
    Attempt("read-double-slash", READ, {"path": "//etc/passwd"}),
    Attempt("read-sibling-prefix-abs", READ, {"path": "{evil}/evil.txt"}),
    Attempt("read-sibling-prefix-rel", READ, {"path": "../ws-evil/evil.txt"}),
    Attempt("read-sibling-prefix-link", READ, {"path": "evil_link/evil.txt"}),
    Attempt("read-percent-dotdot", READ, {"path": "%2e%2e/canary/secret.txt"}, "fails"),
    Attempt("read-percent-slash", READ, {"path": "..%2fcanary%2fsecret.txt"}, "fails"),
    Attempt("read-percent-abs", READ, {"path": "%2Fetc%2Fpasswd"}, "fails"),
    Attempt("read-backslash", READ, {"path": "..\\canary\\secret.txt"}, "fails"),
    Attempt("read-file-uri", READ, {"path": "file://{canary}/secret.txt"}, "fails"),
    Attempt("read-tilde", READ, {"path": "~/../../canary/secret.txt"}),
    Attempt("read-symlink", READ, {"path": "link_out"}),
    Attempt("read-symlink-abs", READ, {"path": "abs_link"}),
    Attempt("read-symlink-chain", READ, {"path": "chain1"}),
    Attempt("read-symlinked-dir", READ, {"path": "dirlink/secret.txt"}),
    Attempt("read-symlink-in-subdir", READ, {"path": "sub/up/nested/deep.txt"}),
    Attempt("read-symlink-to-etc", READ, {"path": "etc_link"}),
    Attempt("read-dotdot-after-symlink", READ, {"path": "dirlink/../ws-evil/evil.txt"}),
    Attempt("read-symlink-loop", READ, {"path": "loop_a"}),
    Attempt("read-nul", READ, {"path": "inside.txt\x00../../etc/passwd"}),
    Attempt("read-long-path", READ, {"path": LONG_PATH}),
    Attempt("read-long-name", READ, {"path": LONG_NAME}),
    Attempt("read-fifo", READ, {"path": "pipe"}),
    Attempt("read-device", READ, {"path": "devnode"}, setup=device_node),
    Attempt("read-socket", READ, {"path": "sock"}, setup=unix_socket),
    # ------------------------------------------------------------------ file-write
    Attempt("write-dotdot", WRITE, {"path": "../canary/pwned.txt", "content": "x"}),
    Attempt("write-abs-outside", WRITE, {"path": "{canary}/secret.txt", "content": "x"}),
    Attempt("write-sibling-prefix", WRITE, {"path": "../ws-evil/pwned.txt", "content": "x"}),
    Attempt("write-symlink", WRITE, {"path": "link_out", "content": "x"}),
    Attempt("write-symlink-chain", WRITE, {"path": "chain1", "content": "x"}),
    Attempt("write-dangling-symlink", WRITE, {"path": "dangling_out", "content": "x"}),
    Attempt("write-dangling-abs-symlink", WRITE, {"path": "dangling_abs", "content": "x"}),
    Attempt("write-under-dangling-dir", WRITE, {"path": "dangling_dir/x.txt", "content": "x"}),
    Attempt("write-parents-through-link", WRITE, {"path": "dirlink/new/f.txt", "content": "x"}),
    Attempt("write-hard-link", WRITE, {"path": "hardlink", "content": "x"}, setup=hard_link),
    Attempt("write-fifo", WRITE, {"path": "pipe", "content": "x"}),
    Attempt("write-symlink-loop", WRITE, {"path": "loop_a", "content": "x"}),
    Attempt("write-nul", WRITE, {"path": "x\x00/../../canary/secret.txt", "content": "x"}),
    Attempt("write-long-path", WRITE, {"path": LONG_PATH, "content": "x"}),
    Attempt(
        "write-percent-is-literal",
        WRITE,
        {"path": "%2e%2e/canary/pwned.txt", "content": "x"},
        "contained",
        check=literal_file("%2e%2e/canary/pwned.txt"),
    ),
    # ------------------------------------------------------------------ file-edit
    Attempt("edit-dotdot", EDIT, {"path": "../canary/secret.txt"}),
    Attempt("edit-abs-outside", EDIT, {"path": "{canary}/secret.txt"}),
    Attempt("edit-symlink", EDIT, {"path": "link_out"}),
    Attempt("edit-symlink-chain", EDIT, {"path": "chain1"}),
    Attempt("edit-symlinked-dir", EDIT, {"path": "dirlink/secret.txt"}),
    Attempt("edit-sibling-prefix", EDIT, {"path": "evil_link/evil.txt"}),
    Attempt("edit-hard-link", EDIT, {"path": "hardlink"}, setup=hard_link),
    Attempt("edit-fifo", EDIT, {"path": "pipe"}),
    Attempt("edit-nul", EDIT, {"path": "link_out\x00"}),
    # ------------------------------------------------------------------ file-list
    Attempt("list-path-dotdot", LIST, {"path": "../canary"}),
    Attempt("list-path-abs", LIST, {"path": "{canary}"}),
    Attempt("list-path-symlinked-dir", LIST, {"path": "dirlink"}),
    Attempt("list-path-sibling-prefix", LIST, {"path": "{evil}"}),
    Attempt("list-path-fifo", LIST, {"path": "pipe"}),
    Attempt("list-pattern-dotdot", LIST, {"pattern": "../*"}, names="pattern"),
    Attempt("list-pattern-abs-etc", LIST, {"pattern": "/etc/*"}, names="pattern"),
    Attempt("list-pattern-abs-canary", LIST, {"pattern": "{canary}/*"}, names="pattern"),
    Attempt("list-pattern-starstar-up", LIST, {"pattern": "**/../.."}, names="pattern"),
    Attempt("list-pattern-inner-dotdot", LIST, {"pattern": "sub/../../*"}, names="pattern"),
    Attempt("list-pattern-nul", LIST, {"pattern": "*\x00/../*"}, names="pattern"),
    Attempt("list-walk-follows-no-link", LIST, {"pattern": "**"}, "no_leak"),
    Attempt("list-pattern-into-link", LIST, {"pattern": "dirlink/**"}, names="pattern"),
    Attempt("list-pattern-into-nested-link", LIST, {"pattern": "sub/up/*/*"}, names="pattern"),
    Attempt("list-pattern-literal-link", LIST, {"pattern": "link_out"}, names="pattern"),
    # ------------------------------------------------------------------ file-search
    Attempt("search-path-dotdot", SEARCH, {"pattern": "C", "path": "../canary"}),
    Attempt("search-path-abs-file", SEARCH, {"pattern": "C", "path": "{canary}/secret.txt"}),
    Attempt("search-path-etc", SEARCH, {"pattern": "root", "path": "/etc"}),
    Attempt("search-path-symlink", SEARCH, {"pattern": "C", "path": "link_out"}),
    Attempt("search-path-symlinked-dir", SEARCH, {"pattern": "C", "path": "dirlink"}),
    Attempt("search-path-fifo", SEARCH, {"pattern": "C", "path": "pipe"}),
    Attempt("search-glob-dotdot", SEARCH, {"pattern": "C", "glob": "../*"}, names="glob"),
    Attempt("search-glob-abs", SEARCH, {"pattern": "root", "glob": "/etc/*"}, names="glob"),
    Attempt("search-glob-into-link", SEARCH, {"pattern": "C", "glob": "dirlink/*"}, names="glob"),
    Attempt("search-walk-follows-no-link", SEARCH, {"pattern": "CANARY|root:x"}, "no_leak"),
]

SHELL_ATTEMPTS = [
    Attempt(
        "shell-symlink-then-read",
        READ,
        {"path": "made_link"},
        shell="ln -s ../canary/secret.txt made_link",
    ),
    Attempt(
        "shell-dir-symlink-then-read",
        READ,
        {"path": "made_dir/secret.txt"},
        shell="ln -s {canary} made_dir",
    ),
    Attempt(
        "shell-dangling-symlink-then-write",
        WRITE,
        {"path": "made_dangling", "content": "x"},
        shell="ln -s {canary}/from_shell.txt made_dangling",
    ),
    Attempt(
        "shell-symlink-then-edit",
        EDIT,
        {"path": "made_link"},
        shell="ln -s ../canary/secret.txt made_link",
    ),
    Attempt(
        "shell-dir-symlink-then-list",
        LIST,
        {"path": "made_dir"},
        shell="ln -s {canary} made_dir",
    ),
    Attempt(
        "shell-dir-symlink-then-list-pattern",
        LIST,
        {"pattern": "made_dir/**"},
        names="pattern",
        shell="ln -s {canary} made_dir",
    ),
    Attempt(
        "shell-dir-symlink-then-list-everything",
        LIST,
        {"pattern": "**"},
        "no_leak",
        shell="ln -s {canary} made_dir && ln -s ../canary/secret.txt made_link",
    ),
    Attempt(
        "shell-links-then-search-everything",
        SEARCH,
        {"pattern": "CANARY"},
        "no_leak",
        shell="ln -s {canary} made_dir && ln -s ../canary/secret.txt made_link",
    ),
    Attempt(
        "shell-hard-link-then-write",
        WRITE,
        {"path": "made_hard", "content": "x"},
        "safe",
        shell="ln {canary}/secret.txt made_hard || true",
    ),
]


def output_paths(output: Any) -> list[str]:
    """Every path a file tool's output reports (``path``, ``entries``, hits' ``path``)."""
    paths = [output["path"]] if "path" in output else []
    paths += output.get("entries", [])
    paths += [hit["path"] for hit in output.get("matches", [])]
    return paths


def fill(value: Any, sb: Sandbox) -> Any:
    if isinstance(value, str) and "{" in value:
        return value.format(canary=sb.canary, evil=sb.evil, root=sb.root)
    return value


def attempt_escape(attempt: Attempt, call: Caller, sb: Sandbox) -> None:
    plant_traps(sb)
    if attempt.setup is not None:
        attempt.setup(sb)
    if attempt.shell is not None:
        planted = call("builtin/shell", command=fill(attempt.shell, sb), timeout_ms=15_000)
        assert planted["exit_code"] == 0, planted["stderr"]
    args = {key: fill(value, sb) for key, value in attempt.args.items()}
    if attempt.tool == EDIT:
        args |= {"old_text": "CANARY", "new_text": "PWNED"}
    before = sb.snapshot()
    error: CleverAgentsError | None = None
    output: Any = None
    try:
        output = call(attempt.tool, **args)
    except CleverAgentsError as exc:
        error = exc
    assert sb.snapshot() == before, "the tree outside the sandbox root changed"
    if error is not None:
        assert not any(marker in error.message for marker in LEAK_MARKERS[:1])
        assert show(args[attempt.names]) in error.message
    match attempt.expect:
        case "refused":
            assert isinstance(error, SandboxViolationError), f"expected a refusal, got {error!r}"
            assert error.code == SandboxViolationError.code
        case "fails":
            assert error is not None, f"expected a failure, got {output!r}"
        case "contained" | "no_leak":
            assert error is None, f"expected success, got {error!r}"
            text = json.dumps(output)
            assert not any(marker in text for marker in LEAK_MARKERS), text
            inside = sb.at("")
            assert all(path.startswith(inside) for path in output_paths(output)), output
            if attempt.check is not None:
                attempt.check(sb, output)
        case "safe":
            pass
        case other:
            raise AssertionError(f"unknown expectation {other}")


def test_the_table_holds_at_least_forty_attempts_across_every_file_tool() -> None:
    assert len(ATTEMPTS) + len(SHELL_ATTEMPTS) >= 40
    assert {a.tool for a in ATTEMPTS} == {READ, WRITE, EDIT, LIST, SEARCH}


@pytest.mark.parametrize("attempt", [a.param() for a in ATTEMPTS])
def test_an_escape_attempt_is_stopped_and_the_outside_is_untouched(
    attempt: Attempt, call: Caller, sandbox: Sandbox
) -> None:
    attempt_escape(attempt, call, sandbox)


@pytest.mark.parametrize("attempt", [a.param() for a in SHELL_ATTEMPTS])
def test_a_trap_planted_by_the_shell_is_not_followed(
    attempt: Attempt, call_with_shell: Caller, sandbox: Sandbox
) -> None:
    attempt_escape(attempt, call_with_shell, sandbox)


def test_a_confined_shell_cannot_make_a_hard_link_to_a_file_outside(sandbox: Sandbox) -> None:
    # Unconfined, the shell can link whatever the daemon's user can (docs/security.md).
    call = make_caller(builtin_tools(shell=shell_tool("bwrap", sandbox)), sandbox.root)
    before = sandbox.snapshot()
    result = call("builtin/shell", command=f"ln {sandbox.canary}/secret.txt h")
    assert result["exit_code"] != 0
    assert not (sandbox.root / "h").exists()
    assert sandbox.snapshot() == before


# ----------------------------------------------------------------------------- swaps mid-walk


def swap_for_symlink(directory: Path, target: Path) -> Path:
    """Move ``directory`` aside and put a symlink to ``target`` at its name; the new place."""
    moved = directory.with_name(directory.name + ".moved")
    directory.rename(moved)
    directory.symlink_to(target, target_is_directory=True)
    return moved


def undo_swap(directory: Path, moved: Path) -> None:
    directory.unlink()
    moved.rename(directory)


def outside(sb: Sandbox) -> dict[str, Any]:
    """The snapshot of everything outside the root, but the mtime of the directory
    holding it (a swap of the root's own name renames in there)."""
    return {path: state for path, state in sb.snapshot().items() if path != str(sb.base)}


WALKS = [
    pytest.param(LIST, {"pattern": "**"}, id="list"),
    pytest.param(SEARCH, {"pattern": "CANARY|secret|deep|inside"}, id="search"),
]


@pytest.mark.parametrize(("tool", "args"), WALKS)
def test_a_directory_swapped_for_a_symlink_after_its_parent_was_listed_is_not_followed(
    tool: str, args: dict[str, Any], call: Caller, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race made deterministic: the swap lands after the root was scanned (sub is a
    # directory there) and before the walk opens sub.
    open_directory_at = _walk.open_directory_at
    swapped: list[Path] = []

    def swap_then_open(name: str, dir_fd: int) -> int:
        if name == "sub" and not swapped:
            swapped.append(swap_for_symlink(sandbox.root / "sub", sandbox.canary))
        return open_directory_at(name, dir_fd)

    monkeypatch.setattr(_walk, "open_directory_at", swap_then_open)
    before = sandbox.snapshot()
    output = call(tool, **args)
    assert swapped, "the walk never opened sub"
    text = json.dumps(output)
    assert not any(marker in text for marker in LEAK_MARKERS), text
    assert "nested" not in text
    assert all(path.startswith(sandbox.at("")) for path in output_paths(output))
    assert "'sub'" in output["note"]  # the skipped directory is named
    undo_swap(sandbox.root / "sub", swapped[0])
    assert sandbox.snapshot() == before


@pytest.mark.parametrize(("tool", "args"), WALKS)
def test_a_root_swapped_after_the_pin_check_is_walked_as_pinned(
    tool: str, args: dict[str, Any], call: Caller, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pin's check passes, then the root's name is swapped for a symlink to the canary
    # before the walk starts: the walk must still list the pinned directory.
    check = PinnedRoot.check
    swapped: list[Path] = []

    def check_then_swap(pin: PinnedRoot) -> str:
        real = check(pin)
        if not swapped:
            swapped.append(swap_for_symlink(sandbox.root, sandbox.canary))
        return real

    monkeypatch.setattr(PinnedRoot, "check", check_then_swap)
    before = outside(sandbox)
    pinned = {
        LIST: [sandbox.at("inside.txt"), sandbox.at("sub/"), sandbox.at("sub/file.txt")],
        SEARCH: [sandbox.at("inside.txt")],
    }[tool]
    with PinnedRoot.open(str(sandbox.root)).activate():
        output = call(tool, **args)
    assert swapped, "the pin was never checked"
    text = json.dumps(output)
    assert not any(marker in text for marker in LEAK_MARKERS), text
    assert output_paths(output) == pinned  # the pinned directory's names, as they were
    undo_swap(sandbox.root, swapped[0])
    assert outside(sandbox) == before


# ------------------------------------------------------------ swaps between resolution and open

OPENS = [
    pytest.param(READ, {}, id="read"),
    pytest.param(WRITE, {"content": "mine\n"}, id="write"),
    pytest.param(EDIT, {"old_text": "sub", "new_text": "mine"}, id="edit"),
]


@pytest.mark.parametrize("swapped_name", ["file.txt", "sub"], ids=["the-file", "a-parent"])
@pytest.mark.parametrize(("tool", "args"), OPENS)
def test_a_symlink_swapped_in_while_a_file_is_opened_is_a_sandbox_refusal(
    tool: str,
    args: dict[str, Any],
    swapped_name: str,
    call: Caller,
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The race made deterministic: the path resolves inside the root, then the file (or
    # a directory on its way) becomes a symlink to the canary before the tool opens it.
    # The open refuses to follow it, and says so: a refusal naming the path as given
    # (-32019), not a failure to open it (-32011, "cannot open path ...: None").
    module = {READ: _file_read, WRITE: _file_write, EDIT: _file_edit}[tool]
    resolve = module.resolve_path
    moved: list[Path] = []
    target = sandbox.root / "sub" / swapped_name if swapped_name == "file.txt" else None

    def resolve_then_swap(*a: Any, **kw: Any) -> Any:
        real = resolve(*a, **kw)
        if not moved:
            if target is not None:
                moved.append(target.with_name("file.txt.moved"))
                target.rename(moved[0])
                target.symlink_to(sandbox.canary / "secret.txt")
            else:
                moved.append(swap_for_symlink(sandbox.root / "sub", sandbox.canary / "nested"))
        return real

    monkeypatch.setattr(module, "resolve_path", resolve_then_swap)
    before = sandbox.snapshot()
    with pytest.raises(CleverAgentsError) as raised:
        call(tool, path="sub/file.txt", **args)
    assert moved, "the tool never resolved its path"
    assert raised.value.code == SandboxViolationError.code, raised.value.message
    assert show("sub/file.txt") in raised.value.message
    assert "CANARY" not in raised.value.message
    assert sandbox.snapshot() == before
