"""Helpers of the workspace tests: a sandbox beside canaries, and tool callers.

Layout of a :class:`Sandbox` (all under the test's ``tmp_path``)::

    ws/                 the sandbox root
    ws-evil/            a sibling sharing the root's name as a prefix
    canary/             files outside the root; must never change

``make_caller`` runs a built-in tool the way the runner does: inputs validated against
the schema, the reserved keys added, the output validated against the output schema.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from cleveragents.tool import ToolSpec
from cleveragents.workspace import ShellTool, WorkspaceLimits
from cleveragents.workspace.shell import DEFAULT_HIDDEN_PATHS

CANARY_TEXT = "CANARY-SECRET\n"
SHELL_TIMEOUT_MS = 15_000


@functools.cache
def bwrap_status() -> tuple[bool, str]:
    """Whether bwrap can confine commands here, and the probe's explanation."""
    confinement = ShellTool().confinement()  # honours $CLEVERAGENTS_BWRAP
    return confinement.confined, confinement.reason


def require_bwrap() -> None:
    usable, reason = bwrap_status()
    if not usable:
        pytest.skip(f"bubblewrap cannot confine commands on this machine: {reason}")


@attrs.define
class Sandbox:
    base: Path
    root: Path
    canary: Path
    evil: Path

    def at(self, rel: str) -> str:
        """Where a file tool reports ``rel``: its absolute path in the real root (§10.1)."""
        return os.path.join(os.path.realpath(self.root), rel)

    def snapshot(self) -> dict[str, tuple[Any, ...]]:
        """Every path outside the root: type, mode, links, size, mtime, content or target."""
        state: dict[str, tuple[Any, ...]] = {}
        for directory, dirs, files in os.walk(self.base):
            here = Path(directory)
            if here == self.root:
                dirs.clear()
                continue
            for name in [*dirs, *files]:
                path = here / name
                if path == self.root:
                    continue
                info = path.lstat()
                if stat.S_ISLNK(info.st_mode):
                    detail: Any = os.readlink(path)
                elif stat.S_ISREG(info.st_mode):
                    detail = path.read_bytes()
                else:
                    detail = None
                state[str(path)] = (
                    info.st_mode,
                    info.st_nlink,
                    info.st_size,
                    info.st_mtime_ns,
                    detail,
                )
            info = here.lstat()
            state[str(here)] = (info.st_mode, info.st_nlink, info.st_mtime_ns)
        return state


def make_sandbox(base: Path) -> Sandbox:
    root = base / "ws"
    canary = base / "canary"
    evil = base / "ws-evil"
    for directory in (root / "sub", canary / "nested", evil):
        directory.mkdir(parents=True)
    (root / "inside.txt").write_text("inside\n")
    (root / "sub" / "file.txt").write_text("sub file\n")
    (canary / "secret.txt").write_text(CANARY_TEXT)
    (canary / "nested" / "deep.txt").write_text(CANARY_TEXT)
    (evil / "evil.txt").write_text(CANARY_TEXT)
    return Sandbox(base, root, canary, evil)


Caller = Callable[..., Any]


def make_caller(tools: list[ToolSpec], root: Path) -> Caller:
    by_name = {tool.name: tool for tool in tools}

    def call(name: str, **arguments: Any) -> Any:
        spec = by_name[name]
        spec.validate_input(arguments)
        result = spec.handler({**arguments, "sandbox_root": str(root), "resource_bindings": {}})
        if inspect.isawaitable(result):
            result = asyncio.run(asyncio.wait_for(_as_coroutine(result), 60))
        spec.validate_output(result)
        return result

    return call


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


def shell_tool(mode: str, sandbox: Sandbox, limits: WorkspaceLimits | None = None) -> ShellTool:
    """A shell for ``mode`` ("bwrap" or "unconfined").

    The bwrap one also hides the test's whole ``tmp_path`` (so sibling canaries are
    invisible wherever the temp dir is) and keeps the running Python readable.
    """
    if mode == "unconfined":
        return ShellTool(limits, bwrap=None)
    require_bwrap()
    return ShellTool(
        limits,
        bwrap="auto",
        hidden_paths=(*DEFAULT_HIDDEN_PATHS, str(sandbox.base)),
        extra_ro_paths=(sys.prefix, sys.base_prefix),
    )
