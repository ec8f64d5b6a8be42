"""Built-in workspace tools and their confinement: files, shell, automation profiles.

* :func:`builtin_tools` returns the six built-in tools as
  :class:`~cleveragents.tool.ToolSpec`: ``builtin/file-read``, ``builtin/file-write``,
  ``builtin/file-edit``, ``builtin/file-list``, ``builtin/file-search`` and
  ``builtin/shell``. Each receives the run's ``sandbox_root`` among its inputs and never
  touches anything outside it (see :mod:`~cleveragents.workspace._sandbox` for the path
  rules, :mod:`~cleveragents.workspace.shell` for how commands are confined).
* :class:`SandboxViolationError` and :class:`ProfileError` are the workspace's errors,
  with codes of their own; :class:`WorkspaceToolError` any other failure of its tools.
* :class:`WorkspaceLimits` caps what they read, return and run.
* :class:`AutomationProfile`, :func:`get_profile` and :class:`ProfilePolicy` decide which
  calls run, which are asked about and which are refused.

Paths given to the tools are relative to the sandbox root or absolute inside it; paths in
their outputs are absolute, inside the real (symlink-resolved) root
(``client-protocol/PROTOCOL.md`` §15). Each file tool has a module of its own, assembled
by :mod:`~cleveragents.workspace.files`; the glob and ``.gitignore`` code is in
:mod:`~cleveragents.workspace._globs` (:class:`GitIgnore` is public: the checkpoint store
honours the same rules), the directory walk in
:mod:`~cleveragents.workspace._walk`, the run's pinned root in
:mod:`~cleveragents.workspace._pinned`.

This package stands on :mod:`cleveragents.tool` and knows nothing of the daemon, the wire
or the models.
``docs/security.md`` has the threat model and the residual risks.
"""

from __future__ import annotations

import typing

from ._errors import ProfileError, SandboxViolationError, WorkspaceToolError
from ._globs import GitIgnore
from ._limits import WorkspaceLimits
from ._pinned import PinnedRoot
from ._sandbox import read_confined_head, read_confined_text, resolve_path
from .files import file_tools
from .profiles import (
    BUILTIN_PROFILES,
    DEFAULT_PROFILE,
    AskCallback,
    AutomationProfile,
    ProfilePolicy,
    get_profile,
    parse_profile,
)
from .shell import BWRAP_ENV, Confinement, ShellTool

if typing.TYPE_CHECKING:
    from cleveragents.tool import ToolSpec

__all__ = [
    "BUILTIN_PROFILES",
    "BWRAP_ENV",
    "DEFAULT_PROFILE",
    "AskCallback",
    "AutomationProfile",
    "Confinement",
    "GitIgnore",
    "PinnedRoot",
    "ProfileError",
    "ProfilePolicy",
    "SandboxViolationError",
    "ShellTool",
    "WorkspaceLimits",
    "WorkspaceToolError",
    "builtin_tools",
    "file_tools",
    "get_profile",
    "parse_profile",
    "read_confined_head",
    "read_confined_text",
    "resolve_path",
]


def builtin_tools(
    limits: WorkspaceLimits | None = None, *, shell: ShellTool | None = None
) -> list[ToolSpec]:
    """The six built-in tools, file tools first, sharing ``limits``.

    ``shell`` overrides the shell tool (for example ``ShellTool(bwrap=None)``); by default
    a new :class:`ShellTool` with the same limits is made, which probes bwrap at first use.
    """
    lim = limits or WorkspaceLimits()
    return [*file_tools(lim), (shell or ShellTool(lim)).spec()]
