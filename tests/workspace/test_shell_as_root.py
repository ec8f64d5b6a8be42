"""The shell as root: unconfined only when the profile says so explicitly, and never
leaving a setuid or setgid file behind (a confined command as root can make one too).
Whoever runs the tests, "as root" is what the daemon believes its uid to be."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import time
from typing import Any

import pytest
from workspace_kit import Caller, Sandbox

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import (
    PermissionQuery,
    ToolActorContext,
    ToolCallingRuntime,
    ToolPermissionError,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
)
from cleveragents.workspace import (
    BUILTIN_PROFILES,
    ProfilePolicy,
    ShellTool,
    WorkspaceLimits,
    builtin_tools,
    get_profile,
    profiles,
    shell,
)
from cleveragents.workspace._setid import strip_setid

SETID = stat.S_ISUID | stat.S_ISGID
UNCONFINED_ROOT = {
    "root-ok": {"read": "allow", "write": "allow", "execute": "allow", "unconfined_root": True}
}


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles, "running_as_root", lambda: True)
    monkeypatch.setattr(shell, "running_as_root", lambda: True)


class Asker:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, query: PermissionQuery, reason: str) -> str:
        self.asked.append(reason)
        return "allow_once"


def decide(policy: ProfilePolicy, spec: ToolSpec) -> str | None:
    query = PermissionQuery(spec, {}, "call-1", 1, ToolActorContext(sandbox_root="/ws"))
    refusal: Any = policy.authorize(query)
    if refusal is not None and not isinstance(refusal, str):
        refusal = asyncio.run(refusal)
    return refusal  # type: ignore[no-any-return]


UNCONFINED_SHELL = ShellTool(bwrap=None).spec()


# ----------------------------------------------------------------------- the profile gate


@pytest.mark.parametrize("name", list(BUILTIN_PROFILES))
def test_as_root_every_built_in_profile_refuses_an_unconfined_shell_without_asking(
    as_root: None, name: str
) -> None:
    asker = Asker()
    refusal = decide(ProfilePolicy(name, asker), UNCONFINED_SHELL)
    assert refusal is not None
    assert asker.asked == []
    if BUILTIN_PROFILES[name].execute != "deny":
        assert "would run UNCONFINED (no working bubblewrap) as root" in refusal
        assert "unconfined_root: true" in refusal


def test_as_root_a_profile_that_says_unconfined_root_runs_it(as_root: None) -> None:
    profile = get_profile("root-ok", UNCONFINED_ROOT)
    assert profile.unconfined_root is True
    assert decide(ProfilePolicy(profile), UNCONFINED_SHELL) is None
    assert not any(p.unconfined_root for p in BUILTIN_PROFILES.values())


def test_as_root_a_confined_shell_is_decided_as_usual(as_root: None) -> None:
    assert decide(ProfilePolicy("full-auto", None, lambda: True), UNCONFINED_SHELL) is None
    asker = Asker()
    assert decide(ProfilePolicy("supervised", asker, lambda: True), UNCONFINED_SHELL) is None
    assert len(asker.asked) == 1
    assert "UNCONFINED" not in asker.asked[0]


def test_as_root_full_auto_does_not_run_an_unconfined_command_in_a_run(
    as_root: None, sandbox: Sandbox
) -> None:
    registry = ToolRegistry()
    for spec in builtin_tools(WorkspaceLimits(), shell=ShellTool(bwrap=None)):
        registry.register(spec)
    turns = [
        {"toolCalls": [{"name": "builtin/shell", "arguments": {"command": "touch ran"}}]},
        {"content": "done"},
    ]
    runtime = ToolCallingRuntime(
        registry=registry,
        runner=ToolRunner(registry, policy=ProfilePolicy("full-auto")),
        llm_caller=ScriptedModel(turns),
    )
    context = ToolActorContext(sandbox_root=str(sandbox.root))
    (record,) = runtime.run_tool_loop("go", context).tool_call_history
    assert record.success is False
    assert record.error_code == ToolPermissionError.code
    assert "as root" in (record.error or "")
    assert not (sandbox.root / "ran").exists()


def test_a_custom_profiles_unconfined_root_must_be_a_boolean() -> None:
    from cleveragents.workspace import ProfileError

    fields = {"read": "allow", "write": "allow", "execute": "allow", "unconfined_root": "yes"}
    with pytest.raises(ProfileError) as raised:
        get_profile("x", {"x": fields})
    assert "unconfined_root must be a boolean" in raised.value.message


# ----------------------------------------------------------------------- setuid and setgid


MAKE_SETID = (
    "cp /bin/true su && chmod 4755 su && mkdir -p deep/er && cp /bin/true deep/er/sg "
    "&& chmod 2755 deep/er/sg && cp /bin/true plain && chmod 755 plain && ls -l su"
)


def test_files_a_command_leaves_setuid_or_setgid_lose_those_bits(
    as_root: None, sandbox: Sandbox, shell_mode: str, call_with_shell: Caller
) -> None:
    result = call_with_shell("builtin/shell", command=MAKE_SETID)
    assert result["exit_code"] == 0, result
    assert result["stdout"].startswith("-rws"), "the command itself saw the bit it set"
    for name in ("su", "deep/er/sg", "plain"):
        mode = (sandbox.root / name).stat().st_mode
        assert mode & SETID == 0, name
        assert stat.S_IMODE(mode) == 0o755, name
    assert "took the setuid/setgid bits off 2 file(s)" in result["note"]
    assert "su" in result["note"]
    assert "deep/er/sg" in result["note"]


def test_a_setid_file_outside_the_root_behind_a_link_keeps_its_bits(
    as_root: None, sandbox: Sandbox, call: Caller
) -> None:
    outside = sandbox.canary / "tool"
    shutil.copy("/bin/true", outside)
    outside.chmod(0o4755)
    result = call("builtin/shell", command=f"ln -s {outside} link && chmod 4755 link")
    assert result["exit_code"] == 0, result
    assert stat.S_IMODE(outside.stat().st_mode) == 0o4755
    assert (sandbox.root / "link").is_symlink()


def test_a_file_that_had_the_bits_before_the_command_keeps_them(sandbox: Sandbox) -> None:
    old = sandbox.root / "old-tool"
    shutil.copy("/bin/true", old)
    old.chmod(0o4755)
    fd = os.open(sandbox.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        # A command that started after the file's last change: nothing of its doing.
        sweep = strip_setid(fd, time.time_ns() + 5_000_000_000)
        assert sweep.stripped == ()
        assert sweep.complete
        assert stat.S_IMODE(old.stat().st_mode) == 0o4755
        sweep = strip_setid(fd, 0)
        assert sweep.stripped == ("old-tool",)
    finally:
        os.close(fd)


def test_the_sweep_stops_at_its_bound_and_says_so(sandbox: Sandbox) -> None:
    for index in range(20):
        (sandbox.root / f"f{index}").write_text("x")
    fd = os.open(sandbox.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert strip_setid(fd, 0, limit=5).complete is False
        assert strip_setid(fd, 0, limit=10_000).complete is True
    finally:
        os.close(fd)


def test_the_sweep_does_not_run_as_another_user(
    monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox, call: Caller
) -> None:
    monkeypatch.setattr(shell, "running_as_root", lambda: False)
    result = call("builtin/shell", command="cp /bin/true mine && chmod 4755 mine")
    assert result["exit_code"] == 0, result
    assert stat.S_IMODE((sandbox.root / "mine").stat().st_mode) == 0o4755


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv is not installed")
def test_an_unconfined_command_cannot_gain_privileges(call: Caller) -> None:
    result = call("builtin/shell", command="grep NoNewPrivs /proc/self/status")
    assert result["confined"] is False
    assert result["stdout"].split() == ["NoNewPrivs:", "1"]
