"""Fixtures of the workspace tests (helpers live in ``workspace_kit``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from workspace_kit import (
    Caller,
    Sandbox,
    make_caller,
    make_sandbox,
    require_bwrap,
    shell_tool,
)

from cleveragents.workspace import ShellTool, WorkspaceLimits, builtin_tools


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return make_sandbox(tmp_path)


@pytest.fixture
def limits() -> WorkspaceLimits:
    return WorkspaceLimits()


@pytest.fixture
def call(sandbox: Sandbox, limits: WorkspaceLimits) -> Caller:
    """Call a built-in tool in ``sandbox.root`` (the shell unconfined)."""
    return make_caller(builtin_tools(limits, shell=ShellTool(limits, bwrap=None)), sandbox.root)


@pytest.fixture(params=["bwrap", "unconfined"])
def shell_mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    if mode == "bwrap":
        require_bwrap()
    return mode


@pytest.fixture
def call_with_shell(sandbox: Sandbox, shell_mode: str) -> Caller:
    """Like ``call``, with the shell confined or not according to ``shell_mode``."""
    limits = WorkspaceLimits()
    return make_caller(builtin_tools(limits, shell=shell_tool(shell_mode, sandbox)), sandbox.root)
