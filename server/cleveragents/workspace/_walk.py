"""Globs, ``.gitignore`` and the directory walk behind ``file-list`` and ``file-search``.

Owns:

* :func:`glob_to_regex` and :class:`Glob`: the glob syntax of ``file-list`` ``pattern``,
  ``file-search`` ``glob`` and ``.gitignore``. ``*`` matches within one path segment,
  ``?`` one character, ``[abc]``/``[!abc]`` a class, ``**`` any number of segments
  (``**/*.py``, ``src/**``); a trailing ``/`` selects directories only. Globs are matched
  in linear time by RE2 (:mod:`~cleveragents.workspace._patterns`); one longer than
  :data:`~cleveragents.workspace._patterns.MAX_GLOB_CHARS` is refused.
* :class:`GitIgnore`: the ``.gitignore`` subset honoured (documented on the class).
* :class:`Walk`: a sorted, depth-first walk beneath a base directory that never follows
  symlinks, skips ``.git`` and ignored entries, and stops after a number of entries.

It does not know the tools, their arguments, outputs or limits, nor how a path the model
gave is checked: callers pass already resolved real paths (see
:mod:`~cleveragents.workspace._sandbox`), and decide what to report of each
:class:`Entry`. ``.gitignore`` files are opened with
:func:`~cleveragents.workspace._sandbox.open_regular`, like every other file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import attrs

from cleveragents.tool._errors import SandboxViolationError

from ._patterns import GlobMatcher, GlobSet, UnsafeGlobError, compile_glob, glob_to_regex
from ._sandbox import WorkspaceToolError, open_regular, relative_to_root, show

_GITIGNORE_MAX_BYTES = 1024 * 1024
# Rules matched per .gitignore. Each entry walked is matched against all of them, and a
# hostile file can make that cost milliseconds per kilobyte; real ones are a few KiB.
_GITIGNORE_MAX_RULE_CHARS = 64 * 1024
_NOTE_SKIPPED_SHOWN = 3  # skipped .gitignore lines named in a note; the rest are counted


@attrs.define(slots=True, frozen=True)
class Glob:
    """A parsed glob, matched against paths relative to the walk's base."""

    regex: GlobMatcher
    dirs_only: bool
    max_depth: int | None

    @classmethod
    def parse(cls, pattern: str, what: str = "pattern") -> Glob:
        """Parse ``pattern``; :class:`UnsafeGlobError` (named ``what``) if it is too long."""
        dirs_only = pattern.endswith("/")
        segments = [s for s in pattern.split("/") if s not in ("", ".")]
        body = "/".join(segments) or "*"
        depth = None if "**" in body else len(body.split("/"))
        return cls(compile_glob(body, what), dirs_only, depth)

    def matches(self, rel: str, is_dir: bool) -> bool:
        return (is_dir or not self.dirs_only) and self.regex.fullmatch(rel)


@attrs.define(slots=True)
class _IgnoreFile:
    """The rules of one ``.gitignore``: one RE2 set, and per rule (negated, dirs_only)."""

    rules: GlobSet = attrs.field(factory=GlobSet)
    flags: list[tuple[bool, bool]] = attrs.field(factory=list)


@attrs.define(slots=True)
class GitIgnore:
    """The ``.gitignore`` subset the walkers honour.

    Supported: blank lines and ``#`` comments; ``!`` negation (the last matching rule
    wins, and a deeper ``.gitignore`` wins over a shallower one); a trailing ``/`` for
    directories only; a leading or inner ``/`` anchoring the pattern to the
    ``.gitignore``'s directory (otherwise it matches a name at any depth); ``*``, ``?``,
    ``[...]`` and ``**``; ``\\#`` and ``\\!`` escapes. ``.gitignore`` files in the root,
    in every directory between the root and the walk's base, and in every directory
    walked are read. Not supported: ``.git/info/exclude``, global excludes, escaped
    trailing spaces. An ignored directory is not entered, so nothing beneath it can be
    re-included (as in git). ``.git`` itself is always skipped.

    A line that cannot be matched safely (longer than
    :data:`~cleveragents.workspace._patterns.MAX_GLOB_CHARS`, or refused by RE2) is
    skipped and listed in ``skipped``, and so are the lines past the first 64 KiB of one
    file's rules; :meth:`note` says so for the tool's result.
    """

    files: dict[str, _IgnoreFile] = attrs.field(factory=dict)
    skipped: list[str] = attrs.field(factory=list)

    def load(self, root_real: str, dir_real: str) -> None:
        """Read ``dir_real``'s ``.gitignore``, if it is a plain file inside the root."""
        shown = show(relative_to_root(root_real, os.path.join(dir_real, ".gitignore")))
        try:
            fd, info = open_regular(root_real, Path(dir_real, ".gitignore"), os.O_RDONLY, shown)
        except (WorkspaceToolError, SandboxViolationError):
            return  # absent, or not a plain file inside the root: ignored
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(min(info.st_size, _GITIGNORE_MAX_BYTES))
        self.add_text(data.decode("utf-8", "replace"), relative_to_root(root_real, dir_real))

    def add_text(self, text: str, base: str) -> None:
        """Add the rules of a ``.gitignore`` found in ``base`` (relative to the root)."""
        base = "" if base == "." else base
        budget = _GITIGNORE_MAX_RULE_CHARS
        lines = text.splitlines()
        for line_no, line in enumerate(lines, start=1):
            budget -= len(line)
            if budget < 0:
                self.skipped.append(
                    f"{show(self._source(base))} lines {line_no}-{len(lines)} (past the "
                    f"first {_GITIGNORE_MAX_RULE_CHARS} characters of rules)"
                )
                break
            self._add(line, base, line_no)
        rules = self.files.get(base)
        if rules is not None:
            try:
                rules.rules.compile()
            except UnsafeGlobError:
                del self.files[base]
                self.skipped.append(f"every line of {show(self._source(base))}")

    @staticmethod
    def _source(base: str) -> str:
        return f"{base}/.gitignore" if base else ".gitignore"

    def _add(self, line: str, base: str = "", line_no: int = 0) -> None:
        line = line.rstrip()
        if not line or line.startswith("#"):
            return
        negated = line.startswith("!")
        if negated or line.startswith("\\"):
            line = line[1:]
        dirs_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            return
        anchored = "/" in line
        line = line.lstrip("/")
        body = glob_to_regex(line)
        regex = body if anchored else "(?:.*/)?" + body
        rules = self.files.get(base) or _IgnoreFile()
        try:
            rules.rules.add(regex, line)
        except UnsafeGlobError:
            self.skipped.append(f"{show(self._source(base))} line {line_no}")
            return
        rules.flags.append((negated, dirs_only))
        self.files[base] = rules

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether the entry at ``rel`` (relative to the root) is ignored."""
        parts = rel.split("/")
        # Deepest .gitignore first: its last matching rule decides.
        for depth in range(len(parts) - 1, -1, -1):
            base = "/".join(parts[:depth])
            rules = self.files.get(base)
            if rules is None:
                continue
            sub = "/".join(parts[depth:])
            for index in sorted(rules.rules.matches(sub), reverse=True):
                negated, dirs_only = rules.flags[index]
                if is_dir or not dirs_only:
                    return not negated
        return False

    def note(self) -> str | None:
        """What the tool's ``note`` says about skipped lines, or ``None`` if none were."""
        if not self.skipped:
            return None
        named = ", ".join(self.skipped[:_NOTE_SKIPPED_SHOWN])
        more = len(self.skipped) - _NOTE_SKIPPED_SHOWN
        rest = f" and {more} more" if more > 0 else ""
        return (
            f".gitignore rules that cannot be matched safely were skipped ({named}{rest}); "
            "the entries they name may be listed"
        )


@attrs.define(slots=True)
class Entry:
    """One entry met by a :class:`Walk`.

    ``real`` is its absolute path beneath the real root (its parents are symlink-free;
    the entry itself may be a symlink, which is not resolved). ``rel_root`` (relative to
    the root, what ``.gitignore`` rules see) and ``rel_base`` (relative to the walk's
    base, what a :class:`Glob` sees) use ``/`` separators.
    """

    rel_root: str
    rel_base: str
    real: str
    is_dir: bool


@attrs.define(slots=True)
class Walk:
    """A sorted, depth-first walk beneath ``base_real`` that never follows symlinks.

    ``root_real`` and ``base_real`` are real paths, the base inside the root. Entries
    deeper than ``max_depth`` (1: the base's children) are not visited; after
    ``max_entries`` directory entries the walk stops and sets ``exhausted``.
    """

    root_real: str
    base_real: str
    max_entries: int
    max_depth: int | None = None
    ignore: GitIgnore = attrs.field(factory=GitIgnore)
    visited: int = 0
    exhausted: bool = False

    def __iter__(self) -> Iterator[Entry]:
        # .gitignore files above the base apply beneath it too.
        chain = [self.base_real]
        while chain[-1] != self.root_real and chain[-1] != os.path.dirname(chain[-1]):
            chain.append(os.path.dirname(chain[-1]))
        for directory in reversed(chain):
            self.ignore.load(self.root_real, directory)
        yield from self._walk(self.base_real, "", 1)

    def _walk(self, directory: str, rel_dir: str, depth: int) -> Iterator[Entry]:
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            return  # unreadable directory: skipped
        for entry in entries:
            self.visited += 1
            if self.visited > self.max_entries:
                self.exhausted = True
                return
            if entry.name == ".git":
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            rel_base = f"{rel_dir}{entry.name}"
            rel_root = relative_to_root(self.root_real, entry.path)
            if self.ignore.ignored(rel_root, is_dir):
                continue
            yield Entry(rel_root, rel_base, entry.path, is_dir)
            deeper = self.max_depth is None or depth < self.max_depth
            if is_dir and deeper and not self.exhausted:
                self.ignore.load(self.root_real, entry.path)
                yield from self._walk(entry.path, rel_base + "/", depth + 1)
            if self.exhausted:
                return
