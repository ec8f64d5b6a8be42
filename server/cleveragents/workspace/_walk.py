"""Globs, ``.gitignore`` and the directory walk behind ``file-list`` and ``file-search``.

Owns:

* :func:`glob_to_regex` and :class:`Glob`: the glob syntax of ``file-list`` ``pattern``,
  ``file-search`` ``glob`` and ``.gitignore``. ``*`` matches within one path segment,
  ``?`` one character, ``[abc]``/``[!abc]`` a class, ``**`` any number of segments
  (``**/*.py``, ``src/**``); a trailing ``/`` selects directories only.
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
import re
from collections.abc import Iterator
from pathlib import Path

import attrs

from cleveragents.tool._errors import SandboxViolationError

from ._sandbox import WorkspaceToolError, open_regular, relative_to_root, show

_GITIGNORE_MAX_BYTES = 1024 * 1024


def glob_to_regex(pattern: str) -> str:
    """Translate a glob (the syntax in the module docstring) to a regex for ``fullmatch``."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if pattern.startswith("**", i):
                j = i + 2
                at_segment_start = i == 0 or pattern[i - 1] == "/"
                if at_segment_start and j < n and pattern[j] == "/":
                    out.append("(?:.*/)?")
                    i = j + 1
                    continue
                if at_segment_start and j == n:
                    out.append(".*")
                    i = j
                    continue
                i = j
            else:
                i += 1
            out.append("[^/]*")
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


@attrs.define(slots=True, frozen=True)
class Glob:
    """A parsed glob, matched against paths relative to the walk's base."""

    regex: re.Pattern[str]
    dirs_only: bool
    max_depth: int | None

    @classmethod
    def parse(cls, pattern: str) -> Glob:
        dirs_only = pattern.endswith("/")
        segments = [s for s in pattern.split("/") if s not in ("", ".")]
        body = "/".join(segments) or "*"
        depth = None if "**" in body else len(body.split("/"))
        return cls(re.compile(glob_to_regex(body), re.DOTALL), dirs_only, depth)

    def matches(self, rel: str, is_dir: bool) -> bool:
        return (is_dir or not self.dirs_only) and self.regex.fullmatch(rel) is not None


@attrs.define(slots=True)
class GitIgnore:
    """The ``.gitignore`` subset the walkers honour.

    Supported: blank lines and ``#`` comments; ``!`` negation (the last matching rule
    wins); a trailing ``/`` for directories only; a leading or inner ``/`` anchoring the
    pattern to the ``.gitignore``'s directory (otherwise it matches a name at any depth);
    ``*``, ``?``, ``[...]`` and ``**``; ``\\#`` and ``\\!`` escapes. ``.gitignore`` files
    in the root, in every directory between the root and the walk's base, and in every
    directory walked are read. Not supported: ``.git/info/exclude``, global excludes,
    escaped trailing spaces. An ignored directory is not entered, so nothing beneath it
    can be re-included (as in git). ``.git`` itself is always skipped.
    """

    rules: list[tuple[re.Pattern[str], bool, bool]] = attrs.field(factory=list)

    def load(self, root_real: str, dir_real: str) -> None:
        shown = show(relative_to_root(root_real, os.path.join(dir_real, ".gitignore")))
        try:
            fd, info = open_regular(root_real, Path(dir_real, ".gitignore"), os.O_RDONLY, shown)
        except (WorkspaceToolError, SandboxViolationError):
            return  # absent, or not a plain file inside the root: ignored
        with os.fdopen(fd, "rb") as handle:
            text = handle.read(min(info.st_size, _GITIGNORE_MAX_BYTES)).decode("utf-8", "replace")
        base = relative_to_root(root_real, dir_real)
        prefix = "" if base == "." else re.escape(base + "/")
        for line in text.splitlines():
            self._add(line, prefix)

    def _add(self, line: str, prefix: str) -> None:
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
        regex = prefix + (body if anchored else "(?:.*/)?" + body)
        self.rules.append((re.compile(regex, re.DOTALL), negated, dirs_only))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        verdict = False
        for regex, negated, dirs_only in self.rules:
            if dirs_only and not is_dir:
                continue
            if regex.fullmatch(rel):
                verdict = not negated
        return verdict


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
