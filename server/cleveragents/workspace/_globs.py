"""The glob syntax of the file tools, and the ``.gitignore`` subset they honour.

* :class:`Glob`: a ``file-list`` ``pattern`` or ``file-search`` ``glob``. ``*`` matches
  within one path segment, ``?`` one character, ``[abc]``/``[!abc]`` a class, ``**`` any
  number of segments (``**/*.py``, ``src/**``); a trailing ``/`` selects directories
  only.
* :class:`GitIgnore`: the rules of the ``.gitignore`` files a walk meets (the subset is
  documented on the class), read beneath the walk's directory descriptors.

Globs are translated to RE2 and matched in linear time
(:mod:`~cleveragents.workspace._patterns`); one longer than
:data:`~cleveragents.workspace._patterns.MAX_GLOB_CHARS` is refused, and such a
``.gitignore`` line is skipped and noted. This module does not walk: see
:mod:`~cleveragents.workspace._walk`.
"""

from __future__ import annotations

import os

import attrs

from ._errors import name_some, show
from ._patterns import GlobMatcher, GlobSet, UnsafeGlobError, compile_glob, glob_to_regex
from ._pinned import open_regular_at

_GITIGNORE_MAX_BYTES = 1024 * 1024
# Rules matched per .gitignore. Each entry walked is matched against all of them, and a
# hostile file can make that cost milliseconds per kilobyte; real ones are a few KiB.
_GITIGNORE_MAX_RULE_CHARS = 64 * 1024


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

    def load_at(self, dir_fd: int, base: str) -> None:
        """Read the ``.gitignore`` of the open directory ``dir_fd`` (``base``, relative to
        the root), if it is a plain file; a symlink, FIFO or unreadable one is ignored."""
        try:
            fd = open_regular_at(".gitignore", dir_fd)
        except OSError:
            return
        if fd is None:
            return
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(_GITIGNORE_MAX_BYTES)
        self.add_text(data.decode("utf-8", "replace"), base)

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
        return (
            f".gitignore rules that cannot be matched safely were skipped "
            f"({name_some(self.skipped)}); "
            "the entries they name may be listed"
        )
