"""The built-in file tools: ``builtin/file-read``, ``-write``, ``-edit``, ``-list``, ``-search``.

:func:`file_tools` assembles them; each lives in a module of its own (``_file_read``,
``_file_write``, ``_file_edit``, ``_file_list``, ``_file_search``), with what they share
in ``_file_common`` and the caps in :class:`WorkspaceLimits`.

Each tool is a :class:`~cleveragents.tool.ToolSpec` with a strict JSON Schema
(``additionalProperties: false``, snake_case arguments). Read, write and edit have
synchronous handlers, which the runner runs in a worker thread; list and search have
async handlers that run the walk in a thread of their own
(:func:`~cleveragents.workspace._stop.run_stoppable`), which a timeout or a cancel stops
at every directory entry and between chunks of lines. Every path goes through
:func:`~cleveragents.workspace._sandbox.resolve_path` and every file is opened with
:func:`~cleveragents.workspace._sandbox.open_regular` (which uses ``open_beneath``).

Conventions shared by all five tools (``client-protocol/PROTOCOL.md`` §15,
``docs/security.md`` §2):

* Paths given to a tool are relative to the sandbox root, or absolute inside it. Error
  messages name a path as the model gave it.
* Paths in outputs (``path`` fields, listing entries, search hits) are **absolute
  filesystem paths** inside the real (symlink-resolved) sandbox root, like every path on
  the wire; the model can pass them back as they are. A file reached through a symlink
  is reported at its target's path; ``file-list`` reports a symlink at its own path and
  marks directories with a trailing ``/``.
* Text is UTF-8. Reading or editing a file with NUL bytes or invalid UTF-8 fails clearly.
* Outputs are capped by :class:`WorkspaceLimits`; a capped output has ``truncated: true``
  and a ``note`` saying what was left out and how to get more.
* ``file-list`` and ``file-search`` walk the tree with
  :class:`~cleveragents.workspace._walk.Walk`, by directory descriptor beneath the
  run's pinned root: symlinks are not followed (not even one swapped in mid-walk),
  ``.git`` is skipped, ``.gitignore`` files are honoured, and directories deeper than
  ``max_walk_depth`` are not entered; globs are matched against paths relative to the
  ``path`` argument (the glob syntax is in :mod:`~cleveragents.workspace._globs`).
  Search patterns and globs are matched by RE2 in linear time
  (:mod:`~cleveragents.workspace._patterns`).

This module knows nothing of profiles, the shell or the runner.
"""

from __future__ import annotations

from cleveragents.tool import ToolSpec

from ._file_edit import edit_spec
from ._file_list import list_spec
from ._file_read import read_spec
from ._file_search import search_spec
from ._file_write import write_spec
from ._limits import WorkspaceLimits

__all__ = ["WorkspaceLimits", "file_tools"]


def file_tools(limits: WorkspaceLimits | None = None) -> list[ToolSpec]:
    """The five file tools as specs bound to ``limits``."""
    lim = limits or WorkspaceLimits()
    return [read_spec(lim), write_spec(lim), edit_spec(lim), list_spec(lim), search_spec(lim)]
