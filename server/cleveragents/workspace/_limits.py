"""The caps of the built-in tools, which an embedder may change.

:class:`WorkspaceLimits` is shared by the file tools and the shell; ``docs/security.md``
§2.2 lists every limit, these and the fixed ones, with what happens when it is hit.
"""

from __future__ import annotations

import attrs

from ._walk import DEFAULT_MAX_DEPTH


def _positive(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"WorkspaceLimits.{attribute.name} must be positive, got {value}")


@attrs.define(frozen=True, slots=True)
class WorkspaceLimits:
    """Caps on what the built-in tools read, return and run.

    ``max_read_bytes``: text returned by one ``file-read``.
    ``max_write_bytes``: content accepted by ``file-write`` and files ``file-edit`` opens.
    ``max_list_results``: entries returned by one ``file-list``.
    ``max_search_results``: hits returned by one ``file-search``.
    ``max_search_file_bytes``: larger files are skipped by ``file-search``.
    ``max_line_chars``: a search hit's ``text`` is cut to this many characters.
    ``max_walk_entries``: directory entries visited by one list or search.
    ``max_walk_depth``: levels beneath ``path`` a list or search enters; deeper
    directories are listed but not entered, and the ``note`` says so.
    ``max_shell_output_bytes``: bytes kept of each of ``stdout`` and ``stderr``.
    ``default_shell_timeout_ms`` / ``max_shell_timeout_ms``: the shell's timeout when
    the model gives none, and the largest it may ask for.
    """

    max_read_bytes: int = attrs.field(default=256 * 1024, validator=_positive)
    max_write_bytes: int = attrs.field(default=10 * 1024 * 1024, validator=_positive)
    max_list_results: int = attrs.field(default=1000, validator=_positive)
    max_search_results: int = attrs.field(default=200, validator=_positive)
    max_search_file_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=_positive)
    max_line_chars: int = attrs.field(default=500, validator=_positive)
    max_walk_entries: int = attrs.field(default=200_000, validator=_positive)
    max_walk_depth: int = attrs.field(default=DEFAULT_MAX_DEPTH, validator=_positive)
    max_shell_output_bytes: int = attrs.field(default=64 * 1024, validator=_positive)
    default_shell_timeout_ms: int = attrs.field(default=120_000, validator=_positive)
    max_shell_timeout_ms: int = attrs.field(default=600_000, validator=_positive)
