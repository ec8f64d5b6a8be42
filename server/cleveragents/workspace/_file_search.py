"""``builtin/file-search``: lines matching an RE2 regex in the text files beneath ``path``.

Patterns are RE2, matched line by line in linear time
(:mod:`~cleveragents.workspace._patterns`); files come from the same walk as
``file-list`` (or ``path`` itself, when it is a file) and are each opened afresh beneath
the pinned root with ``open_beneath``. The search runs in a stoppable worker
(:mod:`~cleveragents.workspace._stop`) that looks at its flag every
:data:`_LINES_PER_CHECK` lines and before each very long line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from cleveragents.tool import JSONValue, ToolAnnotations, ToolSpec

from ._errors import SandboxViolationError, WorkspaceToolError, show
from ._file_common import (
    BINARY_SNIFF_BYTES,
    OUTPUT_PATH,
    PATH_DOC,
    base_dir,
    check_literal_prefix,
    join_notes,
    object_schema,
)
from ._globs import Glob
from ._limits import WorkspaceLimits
from ._patterns import LineMatcher, compile_search
from ._sandbox import check_pattern, open_regular, relative_to_root, sandbox_root
from ._stop import NEVER, WALK_TIMEOUT_S, StopFlag, stoppable
from ._walk import Entry, Walk

_LINES_PER_CHECK = 1024  # lines searched between two looks at the stop flag
_LONG_LINE = 64 * 1024  # a line this long is preceded by a look of its own


def file_search(
    inputs: dict[str, JSONValue], limits: WorkspaceLimits, stop: StopFlag = NEVER
) -> dict[str, JSONValue]:
    """Search text files beneath ``path`` for an RE2 regex; one hit per matching line."""
    root = sandbox_root(inputs)
    raw_regex = inputs.get("pattern")
    if not isinstance(raw_regex, str):
        raise WorkspaceToolError("pattern must be a string")
    regex = compile_search(raw_regex)
    raw_glob = inputs.get("glob")
    if raw_glob is not None and not isinstance(raw_glob, str):
        raise WorkspaceToolError("glob must be a string")
    checked = None if raw_glob is None else check_pattern(root, raw_glob, what="glob")
    # A glob without '/' matches a file name at any depth (like ripgrep's --glob).
    glob = None
    if checked is not None:
        glob = Glob.parse(checked if "/" in checked else "**/" + checked, "glob")
    base = base_dir(root, inputs, raw_glob is not None and os.path.isabs(raw_glob))
    if raw_glob is not None and checked is not None and "/" in checked:
        check_literal_prefix(root, base, checked, raw_glob, "glob")
    if not base.exists():
        raise WorkspaceToolError(f"path {show(str(inputs.get('path', '.')))} does not exist")
    walk: Walk | None = None
    files: Iterator[Entry]
    if base.is_dir():
        walk = Walk(
            root,
            str(base),
            limits.max_walk_entries,
            depth_cap=limits.max_walk_depth,
            stop=stop.check,
        )
        files = iter(walk)
    else:
        files = iter([Entry(relative_to_root(root, base), base.name, str(base), False)])
    matches, truncated = _search(root, files, glob, regex, limits, stop)
    return _output(matches, truncated, walk, limits)


def _search(
    root: str,
    files: Iterator[Entry],
    glob: Glob | None,
    regex: LineMatcher,
    limits: WorkspaceLimits,
    stop: StopFlag,
) -> tuple[list[JSONValue], bool]:
    """The hits in ``files`` (those ``glob`` selects), and whether the cap cut them."""
    matches: list[JSONValue] = []
    for entry in files:
        stop.check()
        if entry.is_dir or (glob is not None and not glob.matches(entry.rel_base, False)):
            continue
        for line_no, text in _grep(root, entry, regex, limits, stop):
            if len(matches) >= limits.max_search_results:
                return matches, True
            matches.append({"path": entry.real, "line": line_no, "text": text})
    return matches, False


def _output(
    matches: list[JSONValue], truncated: bool, walk: Walk | None, limits: WorkspaceLimits
) -> dict[str, JSONValue]:
    """The tool's output: the hits, whether anything was left out, and why."""
    exhausted = walk is not None and walk.exhausted
    cut = truncated or exhausted or (walk is not None and walk.depth_capped)
    output: dict[str, JSONValue] = {"matches": matches, "truncated": cut}
    cap_note = None
    if truncated:
        cap_note = (
            f"only the first {limits.max_search_results} matches are shown; "
            "narrow the pattern, glob or path"
        )
    elif exhausted:
        cap_note = (
            f"the walk stopped after {limits.max_walk_entries} directory entries; "
            "narrow the glob or path"
        )
    note = join_notes(cap_note, walk.note() if walk is not None else None)
    if note is not None:
        output["note"] = note
    return output


def _grep(
    root: str, entry: Entry, regex: LineMatcher, limits: WorkspaceLimits, stop: StopFlag
) -> Iterator[tuple[int, str]]:
    """Each matching line of ``entry``: its number and its text, cut to ``max_line_chars``.

    Lines are matched as UTF-8 bytes (RE2 reads them as they are) and only hits are
    decoded, invalid bytes replaced.
    """
    shown = show(entry.rel_root)
    try:
        fd, info = open_regular(root, Path(entry.real), os.O_RDONLY, shown)
    except (WorkspaceToolError, SandboxViolationError):
        return  # a symlink, a FIFO, a vanished file: not searched
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limits.max_search_file_bytes:
            return
        data = handle.read(limits.max_search_file_bytes)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return
    cut = 4 * limits.max_line_chars + 4  # bytes that always decode to more than the cap
    for index, line in enumerate(data.split(b"\n"), start=1):
        if index % _LINES_PER_CHECK == 0 or len(line) > _LONG_LINE:
            stop.check()
        if regex.search(line):
            text = line[:cut].decode("utf-8", "replace")
            if len(line) <= cut:
                text = text.rstrip("\r")
            if len(text) > limits.max_line_chars:
                text = text[: limits.max_line_chars] + "…[line truncated]"
            yield index, text


def search_spec(limits: WorkspaceLimits) -> ToolSpec:
    """``builtin/file-search`` bound to ``limits``."""
    hit = object_schema(
        {"path": OUTPUT_PATH, "line": {"type": "integer"}, "text": {"type": "string"}},
        ["path", "line", "text"],
    )
    return ToolSpec(
        validators_on_first_use=True,  # the project's own schema: compiled by a test
        name="builtin/file-search",
        description=(
            "Search UTF-8 text files beneath path (default: the sandbox root; may be "
            "one file) for a regular expression in RE2 syntax (no backreferences or "
            "lookaround), line by line. glob filters "
            "the files ('*.py' matches a file name at any depth; a glob with '/' "
            "matches the path relative to path). Binary, symlinked and .gitignored "
            "files are skipped. Returns one {path, line, text} per matching line, "
            f"path absolute, at most {limits.max_search_results}."
        ),
        input_schema=object_schema(
            {
                "pattern": {"type": "string", "minLength": 1},
                "glob": {"type": "string", "minLength": 1},
                "path": {"type": "string", "minLength": 1, "description": PATH_DOC},
            },
            ["pattern"],
        ),
        output_schema=object_schema(
            {
                "matches": {"type": "array", "items": hit},
                "truncated": {"type": "boolean"},
                "note": {"type": "string"},
            },
            ["matches", "truncated"],
        ),
        handler=stoppable("file-search", file_search, limits),
        annotations=ToolAnnotations(read_only=True, idempotent=True),
        timeout_s=WALK_TIMEOUT_S,
    )
