"""The built-in file tools: ``builtin/file-read``, ``-write``, ``-edit``, ``-list``, ``-search``.

Each tool is a :class:`~cleveragents.tool.ToolSpec` with a strict JSON Schema
(``additionalProperties: false``, snake_case arguments). Read, write and edit have
synchronous handlers, which the runner runs in a worker thread; list and search have
async handlers that run the walk in a thread of their own (:func:`run_stoppable`), which
a timeout or a cancel stops at every directory entry and between chunks of lines. Every
path goes through :func:`~cleveragents.workspace._sandbox.resolve_path` and every file is
opened with :func:`~cleveragents.workspace._sandbox.open_regular` (which uses
``open_beneath``).

Conventions shared by all five tools:

* Paths given to a tool are relative to the sandbox root, or absolute inside it (design
  §10.12). Error messages name a path as the model gave it.
* Paths in outputs (``path`` fields, listing entries, search hits) are **absolute
  filesystem paths** inside the real (symlink-resolved) sandbox root, like every path on
  the wire (design §10.1); the model can pass them back as they are. A file reached
  through a symlink is reported at its target's path; ``file-list`` reports a symlink at
  its own path and marks directories with a trailing ``/``.
* Text is UTF-8. Reading or editing a file with NUL bytes or invalid UTF-8 fails clearly.
* Outputs are capped by :class:`WorkspaceLimits`; a capped output has ``truncated: true``
  and a ``note`` saying what was left out and how to get more.
* ``file-list`` and ``file-search`` walk the tree with
  :class:`~cleveragents.workspace._walk.Walk`, by directory descriptor beneath the
  run's pinned root: symlinks are not followed (not even one swapped in mid-walk),
  ``.git`` is skipped, ``.gitignore`` files are honoured, and directories deeper than
  ``max_walk_depth`` are not entered; globs are matched against paths
  relative to the ``path`` argument (the glob syntax is in
  :mod:`~cleveragents.workspace._walk`). Search patterns and globs are matched by RE2 in
  linear time (:mod:`~cleveragents.workspace._patterns`).

This module knows nothing of profiles, the shell or the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from cleveragents.tool._spec import ToolAnnotations, ToolSpec
from cleveragents.tool._types import JSONValue

from ._errors import SandboxViolationError
from ._patterns import LineMatcher, compile_search
from ._sandbox import (
    WorkspaceToolError,
    check_pattern,
    given_root,
    hard_link_message,
    is_within,
    open_regular,
    relative_to_root,
    resolve_path,
    sandbox_root,
    show,
)
from ._walk import DEFAULT_MAX_DEPTH, Entry, Glob, Walk

_BINARY_SNIFF_BYTES = 8192
_CHUNK = 65536


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


# --------------------------------------------------------------------------- helpers


def _user_path(inputs: dict[str, JSONValue], key: str = "path") -> str:
    value = inputs.get(key)
    if not isinstance(value, str):
        raise WorkspaceToolError(f"{key} must be a string")
    return value


def _decode(data: bytes, shown: str) -> str:
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise WorkspaceToolError(f"file {shown} looks binary (it contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkspaceToolError(
            f"file {shown} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None


# --------------------------------------------------------------------------- file-read


def file_read(inputs: dict[str, JSONValue], limits: WorkspaceLimits) -> dict[str, JSONValue]:
    """Read lines ``start_line..end_line`` (1-based, inclusive) of a UTF-8 text file."""
    root = sandbox_root(inputs)
    user_path, start, end = read_args(inputs)
    real = resolve_path(given_root(inputs), user_path)
    shown = show(user_path)
    fd, _info = open_regular(root, real, os.O_RDONLY, shown)
    with os.fdopen(fd, "rb") as handle:
        if b"\x00" in handle.read(_BINARY_SNIFF_BYTES):
            raise WorkspaceToolError(f"file {shown} looks binary (it contains NUL bytes)")
        handle.seek(0)
        return read_window(handle, real, shown, start, end, limits)


def read_args(inputs: dict[str, JSONValue]) -> tuple[str, int, int | None]:
    """``file-read``'s path, ``start_line`` and ``end_line``, checked."""
    user_path = _user_path(inputs)
    start = inputs.get("start_line") or 1
    end = inputs.get("end_line")
    if not isinstance(start, int) or (end is not None and not isinstance(end, int)):
        raise WorkspaceToolError("start_line and end_line must be integers")
    if end is not None and end < start:
        raise WorkspaceToolError(f"end_line {end} is before start_line {start}")
    return user_path, start, end


def read_window(
    handle: BinaryIO,
    real: Path,
    shown: str,
    start: int,
    end: int | None,
    limits: WorkspaceLimits,
    *,
    first_line: int = 1,
    window: bool = False,
) -> dict[str, JSONValue]:
    """``file-read``'s output from ``handle``, whose first line is line ``first_line``
    of the file. ``window``: ``handle`` holds only the lines an editor returned for
    ``start..end``, so the file's length is known only when it gave fewer than asked."""
    lines: list[str] = []
    size = 0
    truncated = False
    stopped_early = window and end is not None
    cut_line: int | None = None
    line_no = first_line - 1
    last = start - 1
    for raw in _bounded_lines(handle, limits.max_read_bytes + 1):
        line_no += 1
        if line_no < start:
            continue
        if end is not None and line_no > end:
            stopped_early = True
            break
        if size + len(raw) > limits.max_read_bytes:
            truncated = stopped_early = True
            if not lines:  # one line over the cap: return its start, never nothing
                head = raw[: limits.max_read_bytes]
                lines.append(_decode_line(head, shown, line_no, cut=True))
                cut_line = last = line_no
            break
        lines.append(_decode_line(raw, shown, line_no))
        size += len(raw)
        last = line_no
    if window and end is not None and line_no < end and not truncated:
        stopped_early = False  # the editor gave fewer lines than asked: that is the end
    if line_no < start and not (start == 1 and line_no == 0):
        if window:
            raise WorkspaceToolError(f"start_line {start} is past the end of {shown}")
        raise WorkspaceToolError(f"start_line {start} is past the end of {shown} ({line_no} lines)")
    output: dict[str, JSONValue] = {
        "path": str(real),
        "content": "".join(lines),
        "start_line": start,
        "end_line": last,
        "total_lines": None if stopped_early else line_no,
        "truncated": truncated,
    }
    if truncated:
        what = f"line {cut_line} was cut at" if cut_line is not None else "output truncated at"
        output["note"] = (
            f"{what} {limits.max_read_bytes} bytes (the read cap); "
            f"read again with start_line={last + 1} to continue"
        )
    return output


def _bounded_lines(handle: BinaryIO, limit: int) -> Iterator[bytes]:
    """Each line of ``handle``, at most ``limit`` bytes of it (the rest is read and dropped).

    Keeps a minified one-line file from being loaded whole just to be cut.
    """
    while raw := handle.readline(limit):
        if len(raw) == limit and not raw.endswith(b"\n"):
            while (rest := handle.readline(_CHUNK)) and not rest.endswith(b"\n"):
                pass
        yield raw


def _decode_line(raw: bytes, shown: str, line_no: int, *, cut: bool = False) -> str:
    """Decode one line strictly; with ``cut``, a character split by the cut is dropped."""
    if b"\x00" in raw:
        raise WorkspaceToolError(f"file {shown} looks binary (NUL byte on line {line_no})")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(raw) - 3 and exc.end == len(raw):
            return raw[: exc.start].decode("utf-8")
        raise WorkspaceToolError(
            f"file {shown} is not UTF-8 text (invalid byte on line {line_no})"
        ) from None


# --------------------------------------------------------------------------- file-write


def file_write(inputs: dict[str, JSONValue], limits: WorkspaceLimits) -> dict[str, JSONValue]:
    """Create or overwrite a file with ``content``, creating parent directories."""
    root = sandbox_root(inputs)
    user_path, data = write_args(inputs, limits)
    real = resolve_path(given_root(inputs), user_path, for_write=True)
    shown = show(user_path)
    created = True
    try:
        fd, info = open_regular(
            root, real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, shown, create_parents=True
        )
    except FileExistsError:
        created = False
        fd, info = open_regular(root, real, os.O_WRONLY, shown)
    with os.fdopen(fd, "wb") as handle:
        # Checked on the descriptor: a link made after resolve_path is caught here.
        if info.st_nlink > 1:
            raise SandboxViolationError(hard_link_message(shown, info.st_nlink))
        handle.truncate(0)
        handle.write(data)
    return {"path": str(real), "bytes_written": len(data), "created": created}


def write_args(inputs: dict[str, JSONValue], limits: WorkspaceLimits) -> tuple[str, bytes]:
    """``file-write``'s path and content (encoded), checked against the write cap."""
    user_path = _user_path(inputs)
    content = inputs.get("content")
    if not isinstance(content, str):
        raise WorkspaceToolError("content must be a string")
    data = content.encode("utf-8", "surrogateescape")
    if len(data) > limits.max_write_bytes:
        raise WorkspaceToolError(
            f"content for {show(user_path)} is {len(data)} bytes; "
            f"the limit is {limits.max_write_bytes}"
        )
    return user_path, data


# --------------------------------------------------------------------------- file-edit


def file_edit(inputs: dict[str, JSONValue], limits: WorkspaceLimits) -> dict[str, JSONValue]:
    """Replace the exact text ``old_text`` with ``new_text`` (once, or every time)."""
    root = sandbox_root(inputs)
    user_path, old, new, replace_all = edit_args(inputs)
    real = resolve_path(given_root(inputs), user_path, for_write=True)
    shown = show(user_path)
    fd, info = open_regular(root, real, os.O_RDWR, shown)
    with os.fdopen(fd, "r+b") as handle:
        if info.st_nlink > 1:
            raise SandboxViolationError(hard_link_message(shown, info.st_nlink))
        check_edit_size(shown, info.st_size, limits)
        text = _decode(handle.read(), shown)
        updated, replacements = apply_edit(
            text, info.st_size, old, new, replace_all=replace_all, shown=shown, limits=limits
        )
        handle.seek(0)
        handle.truncate(0)
        handle.write(updated.encode("utf-8"))
    return {"path": str(real), "replacements": replacements}


def edit_args(inputs: dict[str, JSONValue]) -> tuple[str, str, str, bool]:
    """``file-edit``'s path, ``old_text``, ``new_text`` and ``replace_all``, checked."""
    user_path = _user_path(inputs)
    old = inputs.get("old_text")
    new = inputs.get("new_text")
    replace_all = bool(inputs.get("replace_all", False))
    if not isinstance(old, str) or not isinstance(new, str):
        raise WorkspaceToolError("old_text and new_text must be strings")
    if old == "":
        raise WorkspaceToolError("old_text is empty; use builtin/file-write to write a file")
    if old == new:
        raise WorkspaceToolError("old_text and new_text are identical; nothing to change")
    return user_path, old, new, replace_all


def check_edit_size(shown: str, size: int, limits: WorkspaceLimits) -> None:
    if size > limits.max_write_bytes:
        raise WorkspaceToolError(
            f"file {shown} is {size} bytes; the edit limit is {limits.max_write_bytes}"
        )


def apply_edit(
    text: str,
    size: int,
    old: str,
    new: str,
    *,
    replace_all: bool,
    shown: str,
    limits: WorkspaceLimits,
) -> tuple[str, int]:
    """``text`` (``size`` bytes) with ``old`` replaced by ``new``, and the replacements."""
    count = text.count(old)
    if count == 0:
        raise WorkspaceToolError(f"old_text was not found in {shown}")
    if count > 1 and not replace_all:
        raise WorkspaceToolError(
            f"old_text occurs {count} times in {shown}; include more surrounding text "
            "to make it unique, or pass replace_all=true"
        )
    replacements = count if replace_all else 1
    # The result's size is known before it is built: a small edit repeated (or one
    # replace_all over many hits) must not grow a file past the write cap, nor build
    # a huge string in memory first.
    delta = len(new.encode("utf-8", "surrogatepass")) - len(old.encode("utf-8"))
    result_bytes = size + replacements * delta
    if result_bytes > limits.max_write_bytes:
        raise WorkspaceToolError(
            f"editing {shown} would make it {result_bytes} bytes ({replacements} "
            f"replacement(s)); the write limit is {limits.max_write_bytes}; "
            "the file is unchanged"
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return updated, replacements


# --------------------------------------------------------------------------- list, search


def _base_dir(root: str, inputs: dict[str, JSONValue], pattern_was_absolute: bool) -> Path:
    raw = inputs.get("path")
    if raw is None:
        return Path(root)
    if not isinstance(raw, str):
        raise WorkspaceToolError("path must be a string")
    if pattern_was_absolute:
        raise WorkspaceToolError(
            "an absolute pattern is taken relative to the sandbox root; omit path"
        )
    return resolve_path(root, raw)


_GLOB_CHARS = re.compile(r"[*?\[]")


def _check_literal_prefix(root: str, base: Path, pattern: str, raw: str, what: str) -> None:
    """Refuse a pattern whose fixed leading directories pass through a symlink outside.

    The walk would never follow such a link, so the pattern would just match nothing;
    the contract (design §10.12) wants a pattern reaching outside refused, not filtered.
    """
    literal: list[str] = []
    for segment in pattern.split("/"):
        if _GLOB_CHARS.search(segment):
            break
        if segment not in ("", "."):
            literal.append(segment)
    if not literal:
        return
    if not is_within(os.path.realpath(os.path.join(base, *literal)), root):
        raise SandboxViolationError(
            f"{what} {show(raw)} reaches outside the sandbox root through the symlink "
            f"{show('/'.join(literal))}"
        )


# --------------------------------------------------------------------------- stopping

_LINES_PER_CHECK = 1024  # lines searched between two looks at the stop flag
_LONG_LINE = 64 * 1024  # a line this long is preceded by a look of its own


class _Stopped(WorkspaceToolError):
    """The worker was asked to stop; nobody reads this result (the call was cancelled)."""


class StopFlag:
    """Tells a list or search worker to stop: set on cancel, or when ``deadline`` passes.

    The worker calls :meth:`check` at every directory entry the walk meets (ignored ones
    included, and every 1024 entries of one directory read) and between chunks of lines. One
    RE2 match of one line is never interrupted; a line is at most
    ``max_search_file_bytes`` long, so that is bounded too.
    """

    __slots__ = ("deadline", "event", "timeout_s")

    def __init__(self, timeout_s: float | None = None) -> None:
        self.event = threading.Event()
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s if timeout_s is not None else math.inf

    def check(self) -> None:
        if self.event.is_set():
            raise _Stopped("stopped: the call was cancelled")
        if time.monotonic() >= self.deadline:
            raise WorkspaceToolError(
                f"stopped after {self.timeout_s:g} s, the tool's time limit; "
                "narrow the pattern, glob or path"
            )


_NEVER = StopFlag()  # for direct calls without a flag: never set, no deadline

Work = Callable[[dict[str, JSONValue], WorkspaceLimits, StopFlag], dict[str, JSONValue]]


async def run_stoppable(
    name: str, work: Work, inputs: dict[str, JSONValue], limits: WorkspaceLimits, timeout_s: float
) -> dict[str, JSONValue]:
    """Run ``work`` in a thread of its own and await it without holding the event loop.

    A cancel (the runner's timeout, ``run/cancel``) sets the worker's :class:`StopFlag`
    and is re-raised at once; the worker ends at its next check. A thread of its own
    rather than the loop's shared pool: a worker finishing its last line after a cancel
    must not hold a pool slot that other tools wait for. The thread is named
    ``cleveragents-<name>``.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[dict[str, JSONValue]] = loop.create_future()
    stop = StopFlag(timeout_s)
    context = contextvars.copy_context()

    def settle(result: dict[str, JSONValue] | None, error: BaseException | None) -> None:
        if future.done():
            return  # cancelled meanwhile: the result is dropped
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result or {})

    def target() -> None:
        try:
            result = context.run(work, inputs, limits, stop)
        except Exception as exc:  # noqa: BLE001 - the thread's boundary: handed to the awaiting task
            outcome: tuple[dict[str, JSONValue] | None, BaseException | None] = (None, exc)
        else:
            outcome = (result, None)
        with contextlib.suppress(RuntimeError):  # the loop is already closed: nobody waits
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=target, name=f"cleveragents-{name}", daemon=True).start()
    try:
        return await future
    except asyncio.CancelledError:
        stop.event.set()
        raise


def _join_notes(*notes: str | None) -> str | None:
    present = [note for note in notes if note]
    return "; ".join(present) if present else None


# --------------------------------------------------------------------------- file-list


def file_list(
    inputs: dict[str, JSONValue], limits: WorkspaceLimits, stop: StopFlag = _NEVER
) -> dict[str, JSONValue]:
    """List entries beneath ``path`` matching ``pattern``; directories end with ``/``."""
    root = sandbox_root(inputs)
    raw_pattern = inputs.get("pattern", "*")
    if not isinstance(raw_pattern, str):
        raise WorkspaceToolError("pattern must be a string")
    pattern = check_pattern(root, raw_pattern)
    base = _base_dir(root, inputs, os.path.isabs(raw_pattern))
    shown_base = show(str(inputs.get("path", ".")))
    if not base.exists():
        raise WorkspaceToolError(f"path {shown_base} does not exist")
    if not base.is_dir():
        raise WorkspaceToolError(f"path {shown_base} is not a directory")
    _check_literal_prefix(root, base, pattern, raw_pattern, "pattern")
    glob = Glob.parse(pattern, "pattern")
    walk = Walk(
        root,
        str(base),
        limits.max_walk_entries,
        glob.max_depth,
        depth_cap=limits.max_walk_depth,
        stop=stop.check,
    )
    entries: list[JSONValue] = []
    truncated = False
    for entry in walk:
        stop.check()
        if glob.matches(entry.rel_base, entry.is_dir):
            if len(entries) >= limits.max_list_results:
                truncated = True
                break
            entries.append(entry.real + "/" if entry.is_dir else entry.real)
    cut = truncated or walk.exhausted or walk.depth_capped
    output: dict[str, JSONValue] = {"entries": entries, "truncated": cut}
    cap_note = None
    if truncated:
        cap_note = (
            f"only the first {limits.max_list_results} entries are shown; "
            "narrow the pattern or the path"
        )
    elif walk.exhausted:
        cap_note = (
            f"the walk stopped after {limits.max_walk_entries} directory entries; "
            "narrow the pattern or the path"
        )
    note = _join_notes(cap_note, walk.note())
    if note is not None:
        output["note"] = note
    return output


# --------------------------------------------------------------------------- file-search


def file_search(
    inputs: dict[str, JSONValue], limits: WorkspaceLimits, stop: StopFlag = _NEVER
) -> dict[str, JSONValue]:
    """Search text files beneath ``path`` for an RE2 regex; one hit per matching line."""
    root = sandbox_root(inputs)
    raw_regex = inputs.get("pattern")
    if not isinstance(raw_regex, str):
        raise WorkspaceToolError("pattern must be a string")
    regex = compile_search(raw_regex)
    raw_glob = inputs.get("glob")
    glob: Glob | None = None
    glob_absolute = False
    if raw_glob is not None:
        if not isinstance(raw_glob, str):
            raise WorkspaceToolError("glob must be a string")
        glob_absolute = os.path.isabs(raw_glob)
        checked = check_pattern(root, raw_glob, what="glob")
        # A glob without '/' matches a file name at any depth (like ripgrep's --glob).
        glob = Glob.parse(checked if "/" in checked else "**/" + checked, "glob")
    base = _base_dir(root, inputs, glob_absolute)
    if raw_glob is not None and glob is not None and "/" in checked:
        _check_literal_prefix(root, base, checked, raw_glob, "glob")
    shown_base = show(str(inputs.get("path", ".")))
    if not base.exists():
        raise WorkspaceToolError(f"path {shown_base} does not exist")
    files: Iterator[Entry]
    walk: Walk | None = None
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
    matches: list[JSONValue] = []
    truncated = False
    for entry in files:
        stop.check()
        if entry.is_dir or (glob is not None and not glob.matches(entry.rel_base, False)):
            continue
        for line_no, text in _grep(root, entry, regex, limits, stop):
            if len(matches) >= limits.max_search_results:
                truncated = True
                break
            matches.append({"path": entry.real, "line": line_no, "text": text})
        if truncated:
            break
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
    note = _join_notes(cap_note, walk.note() if walk is not None else None)
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
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
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


# --------------------------------------------------------------------------- specs

_PATH_DOC = "relative to the sandbox root, or absolute inside it"
_OUTPUT_PATH = {"type": "string", "description": "Absolute path inside the sandbox root."}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, JSONValue]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_WALK_TIMEOUT_S = 60.0  # file-list and file-search; their workers stop at it too


def _stoppable(
    name: str, work: Work, limits: WorkspaceLimits
) -> Callable[[dict[str, JSONValue]], Awaitable[dict[str, JSONValue]]]:
    async def handler(inputs: dict[str, JSONValue]) -> dict[str, JSONValue]:
        return await run_stoppable(name, work, inputs, limits, _WALK_TIMEOUT_S)

    return handler


def file_tools(limits: WorkspaceLimits | None = None) -> list[ToolSpec]:
    """The five file tools as specs bound to ``limits``."""
    lim = limits or WorkspaceLimits()
    path_prop = {"type": "string", "minLength": 1, "description": f"File path, {_PATH_DOC}."}
    return [
        ToolSpec(
            name="builtin/file-read",
            description=(
                "Read a UTF-8 text file, optionally only lines start_line..end_line "
                f"(1-based, inclusive). At most {lim.max_read_bytes} bytes are returned; "
                "a longer result is truncated and says where to continue. The output's "
                "path is absolute."
            ),
            input_schema=_schema(
                {
                    "path": path_prop,
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                },
                ["path"],
            ),
            output_schema=_schema(
                {
                    "path": _OUTPUT_PATH,
                    "content": {"type": "string"},
                    "start_line": {"type": "integer"},
                    "end_line": {"type": "integer"},
                    "total_lines": {"type": ["integer", "null"]},
                    "truncated": {"type": "boolean"},
                    "note": {"type": "string"},
                },
                ["path", "content", "start_line", "end_line", "total_lines", "truncated"],
            ),
            handler=lambda inputs: file_read(inputs, lim),
            annotations=ToolAnnotations(read_only=True, idempotent=True),
            timeout_s=30.0,
        ),
        ToolSpec(
            name="builtin/file-write",
            description=(
                "Create or overwrite a UTF-8 text file with content, creating missing "
                "parent directories inside the sandbox root. The output's path is absolute."
            ),
            input_schema=_schema(
                {"path": path_prop, "content": {"type": "string"}}, ["path", "content"]
            ),
            output_schema=_schema(
                {
                    "path": _OUTPUT_PATH,
                    "bytes_written": {"type": "integer"},
                    "created": {"type": "boolean"},
                },
                ["path", "bytes_written", "created"],
            ),
            handler=lambda inputs: file_write(inputs, lim),
            annotations=ToolAnnotations(destructive=True, idempotent=True),
            timeout_s=30.0,
        ),
        ToolSpec(
            name="builtin/file-edit",
            description=(
                "Replace the exact text old_text with new_text in a file. old_text must "
                "occur exactly once unless replace_all is true. Whitespace and line "
                "endings must match exactly. The output's path is absolute."
            ),
            input_schema=_schema(
                {
                    "path": path_prop,
                    "old_text": {"type": "string", "minLength": 1},
                    "new_text": {"type": "string"},
                    "replace_all": {"type": "boolean", "default": False},
                },
                ["path", "old_text", "new_text"],
            ),
            output_schema=_schema(
                {"path": _OUTPUT_PATH, "replacements": {"type": "integer"}},
                ["path", "replacements"],
            ),
            handler=lambda inputs: file_edit(inputs, lim),
            annotations=ToolAnnotations(destructive=True),
            timeout_s=30.0,
        ),
        ToolSpec(
            name="builtin/file-list",
            description=(
                "List files and directories beneath path (default: the sandbox root) "
                "whose path relative to it matches the glob pattern (default '*': the "
                "direct children). '**' matches any depth ('**/*.py'); a trailing '/' "
                "lists directories only. Symlinks are not followed, .git and "
                ".gitignored entries are skipped. Entries are absolute paths, "
                f"directories end with '/'; at most {lim.max_list_results} are returned."
            ),
            input_schema=_schema(
                {
                    "pattern": {"type": "string", "minLength": 1, "default": "*"},
                    "path": {"type": "string", "minLength": 1, "description": _PATH_DOC},
                },
                [],
            ),
            output_schema=_schema(
                {
                    "entries": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Absolute paths inside the sandbox root; "
                        "directories end with '/'.",
                    },
                    "truncated": {"type": "boolean"},
                    "note": {"type": "string"},
                },
                ["entries", "truncated"],
            ),
            handler=_stoppable("file-list", file_list, lim),
            annotations=ToolAnnotations(read_only=True, idempotent=True),
            timeout_s=_WALK_TIMEOUT_S,
        ),
        ToolSpec(
            name="builtin/file-search",
            description=(
                "Search UTF-8 text files beneath path (default: the sandbox root; may be "
                "one file) for a regular expression in RE2 syntax (no backreferences or "
                "lookaround), line by line. glob filters "
                "the files ('*.py' matches a file name at any depth; a glob with '/' "
                "matches the path relative to path). Binary, symlinked and .gitignored "
                "files are skipped. Returns one {path, line, text} per matching line, "
                f"path absolute, at most {lim.max_search_results}."
            ),
            input_schema=_schema(
                {
                    "pattern": {"type": "string", "minLength": 1},
                    "glob": {"type": "string", "minLength": 1},
                    "path": {"type": "string", "minLength": 1, "description": _PATH_DOC},
                },
                ["pattern"],
            ),
            output_schema=_schema(
                {
                    "matches": {
                        "type": "array",
                        "items": _schema(
                            {
                                "path": _OUTPUT_PATH,
                                "line": {"type": "integer"},
                                "text": {"type": "string"},
                            },
                            ["path", "line", "text"],
                        ),
                    },
                    "truncated": {"type": "boolean"},
                    "note": {"type": "string"},
                },
                ["matches", "truncated"],
            ),
            handler=_stoppable("file-search", file_search, lim),
            annotations=ToolAnnotations(read_only=True, idempotent=True),
            timeout_s=_WALK_TIMEOUT_S,
        ),
    ]
