"""The built-in tools and profiles inside a real run (ToolCallingRuntime, both drivers)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from workspace_kit import CANARY_TEXT, Sandbox, shell_tool

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import (
    PermissionQuery,
    ToolActorContext,
    ToolCallingRuntime,
    ToolCallRecord,
    ToolPermissionError,
    ToolRegistry,
    ToolRunner,
)
from cleveragents.workspace import (
    ProfilePolicy,
    SandboxViolationError,
    ShellTool,
    WorkspaceLimits,
    builtin_tools,
    profiles,
)


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"toolCalls": [{"name": name, "arguments": args} for name, args in pairs]}


def runtime(
    turns: list[dict[str, Any]], shell: ShellTool, policy: ProfilePolicy | None = None
) -> ToolCallingRuntime:
    registry = ToolRegistry()
    for spec in builtin_tools(WorkspaceLimits(), shell=shell):
        registry.register(spec)
    return ToolCallingRuntime(
        registry=registry,
        runner=ToolRunner(registry, policy=policy),
        llm_caller=ScriptedModel(turns),
    )


def run(rt: ToolCallingRuntime, sandbox: Sandbox, mode: str) -> list[ToolCallRecord]:
    context = ToolActorContext(sandbox_root=str(sandbox.root))
    if mode == "sync":
        return rt.run_tool_loop("go", context).tool_call_history
    result = asyncio.run(asyncio.wait_for(rt.arun_tool_loop("go", context), 30))
    return result.tool_call_history


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_writes_reads_and_runs_a_command_in_its_sandbox(
    sandbox: Sandbox, shell_mode: str, mode: str
) -> None:
    turns = [
        calls(("builtin/file-write", {"path": "notes/a.txt", "content": "hello\n"})),
        calls(
            ("builtin/file-read", {"path": "notes/a.txt"}),
            ("builtin/shell", {"command": "cat notes/a.txt; pwd", "timeout_ms": 15_000}),
        ),
        {"content": "done"},
    ]
    records = run(runtime(turns, shell_tool(shell_mode, sandbox)), sandbox, mode)
    assert [r.success for r in records] == [True, True, True], [r.error for r in records]
    assert records[0].output["path"] == records[1].output["path"] == sandbox.at("notes/a.txt")
    assert records[1].output["content"] == "hello\n"
    assert records[2].output["stdout"] == f"hello\n{sandbox.root}\n"
    assert records[2].output["confined"] is (shell_mode == "bwrap")
    assert records[2].inputs == {"command": "cat notes/a.txt; pwd", "timeout_ms": 15_000}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_escape_is_a_failed_record_naming_the_path_and_the_run_goes_on(
    sandbox: Sandbox, mode: str
) -> None:
    turns = [
        calls(("builtin/file-read", {"path": "../canary/secret.txt"})),
        {"content": "ok"},
    ]
    [record] = run(runtime(turns, ShellTool(bwrap=None)), sandbox, mode)
    assert record.success is False
    assert record.error_code == SandboxViolationError.code
    assert record.error == "path '../canary/secret.txt' escapes the sandbox root"
    assert CANARY_TEXT.strip() not in str(record.output)


def test_a_declined_write_is_a_failed_record_saying_so(sandbox: Sandbox) -> None:
    async def decline(query: PermissionQuery, reason: str) -> str:
        return "reject_once"

    turns = [calls(("builtin/file-write", {"path": "x.txt", "content": "x"})), {"content": ""}]
    policy = ProfilePolicy("supervised", decline)
    [record] = run(runtime(turns, ShellTool(bwrap=None), policy), sandbox, "async")
    assert record.success is False
    assert record.error_code == ToolPermissionError.code
    assert record.error == "the user declined builtin/file-write"
    assert not (sandbox.root / "x.txt").exists()


def test_ci_refuses_an_unconfined_shell_in_a_run(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "running_as_root", lambda: False)  # as root: refused anyway
    turns = [calls(("builtin/shell", {"command": "touch ran"})), {"content": ""}]
    [record] = run(runtime(turns, ShellTool(bwrap=None), ProfilePolicy("ci")), sandbox, "sync")
    assert record.success is False
    assert record.error_code == ToolPermissionError.code
    assert record.error is not None
    assert "requires a confined shell" in record.error
    assert not (sandbox.root / "ran").exists()


def test_ci_runs_a_confined_shell_in_a_run(sandbox: Sandbox) -> None:
    shell = shell_tool("bwrap", sandbox)
    turns = [calls(("builtin/shell", {"command": "touch ran"})), {"content": ""}]
    [record] = run(runtime(turns, shell, ProfilePolicy("ci")), sandbox, "sync")
    assert record.success is True, record.error
    assert (sandbox.root / "ran").exists()
