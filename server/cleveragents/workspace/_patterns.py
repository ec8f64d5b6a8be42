"""Linear-time patterns: ``file-search`` regexes and the globs of list, search and ``.gitignore``.

Owns:

* :func:`compile_search`: a ``file-search`` pattern compiled with RE2 (the
  ``google-re2`` package), which matches in time linear in the text whatever the
  pattern. What RE2 cannot run (backreferences, lookaround, atomic groups, possessive
  quantifiers) is refused with :class:`UnsupportedPatternError`, naming the construct.
* :func:`glob_to_regex`, :func:`compile_glob` and :class:`GlobSet`: globs translated to
  RE2 regexes, so ``*a*a*a…*b`` against a long name costs one linear pass, not the
  exponential backtracking of Python's ``re``. :class:`GlobSet` matches every rule of
  one ``.gitignore`` in a single pass (an RE2 set).

Matching is on UTF-8 bytes: lines are searched as read, and names (which may hold
undecodable bytes as surrogate escapes) are encoded with ``surrogatepass`` so every
character is one RE2 character.

It does not know the tools, the walk or the sandbox; the glob syntax itself is described
in :mod:`~cleveragents.workspace._walk`.
"""

from __future__ import annotations

from collections.abc import Sequence

import re2  # google-re2 ships no stubs; mypy is told to ignore it (pyproject)

from ._errors import WorkspaceToolError, show

MAX_GLOB_CHARS = 1024
"""Longer globs are refused (``.gitignore``: skipped). RE2 is linear in the name, but
its fallback engine costs name length times pattern size per match, and a walk matches
every entry against every rule; the cap keeps that product small."""

_RE2_MAX_MEM = 64 * 1024 * 1024  # per compiled pattern; RE2 refuses larger programs


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # errors are raised to us; RE2 must not write to stderr
    options.never_capture = True  # only "does it match" is asked: lets RE2 use its DFA
    options.max_mem = _RE2_MAX_MEM
    return options


class UnsupportedPatternError(WorkspaceToolError):
    """A pattern uses a construct the linear-time engine cannot run, or is not valid."""


# --------------------------------------------------------------------------- search


class LineMatcher:
    """A compiled ``file-search`` pattern; :meth:`search` takes one line as UTF-8 bytes."""

    __slots__ = ("_regex", "pattern")

    def __init__(self, pattern: str, regex: re2._Regexp) -> None:
        self.pattern = pattern
        self._regex = regex

    def search(self, line: bytes) -> bool:
        return self._regex.search(line) is not None


def compile_search(pattern: str) -> LineMatcher:
    """Compile a ``file-search`` pattern (RE2 syntax), or raise :class:`UnsupportedPatternError`."""
    try:
        regex = re2.compile(pattern.encode("utf-8", "surrogatepass"), _options())
    except re2.error as exc:
        construct = unsupported_construct(pattern)
        if construct is not None:
            name, token = construct
            raise UnsupportedPatternError(
                f"pattern {show(pattern)} uses {name} ({token}), which file-search does "
                "not support: patterns are RE2 syntax, matched in linear time"
            ) from None
        raise UnsupportedPatternError(
            f"pattern {show(pattern)} is not a valid regex: {_re2_message(exc)}"
        ) from None
    return LineMatcher(pattern, regex)


def _re2_message(exc: BaseException) -> str:
    detail = exc.args[0] if exc.args else ""
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    return str(detail) or "RE2 refused it"


_GROUP_CONSTRUCTS = (
    ("(?<=", "a lookbehind"),
    ("(?<!", "a lookbehind"),
    ("(?=", "a lookahead"),
    ("(?!", "a lookahead"),
    ("(?>", "an atomic group"),
    ("(?P=", "a backreference"),
)


def unsupported_construct(pattern: str) -> tuple[str, str] | None:
    """The first Python-``re`` construct of ``pattern`` RE2 lacks, as (name, token).

    Scans outside character classes only, where these constructs mean what they say.
    """
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt in "123456789":
                return "a backreference", pattern[i : i + 2]
            if nxt == "g" and pattern.startswith("<", i + 2):
                return "a backreference", pattern[i : pattern.find(">", i) + 1 or n]
            if nxt == "Z":
                return r"\Z (RE2 spells the end of text \z)", r"\Z"
            i += 2
            continue
        if char == "[":
            i = _skip_class(pattern, i)
            continue
        if char == "(":
            for token, name in _GROUP_CONSTRUCTS:
                if pattern.startswith(token, i):
                    return name, token
        if char in "*+?}" and pattern.startswith("+", i + 1):
            return "a possessive quantifier", pattern[i : i + 2]
        i += 1
    return None


def _skip_class(pattern: str, start: int) -> int:
    """The index just past the character class opening at ``start``."""
    i, n = start + 1, len(pattern)
    if i < n and pattern[i] == "^":
        i += 1
    if i < n and pattern[i] == "]":
        i += 1
    while i < n and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


# --------------------------------------------------------------------------- globs


def _literal(char: str) -> str:
    """``char`` as a regex literal that RE2 and Python's ``re`` read alike."""
    if char.isalnum() or char == "_" or ord(char) > 0x7F:
        return char
    if char == "\x00":
        return r"\x00"
    return "\\" + char


def glob_to_regex(pattern: str) -> str:
    """Translate a glob (syntax in :mod:`~cleveragents.workspace._walk`) to a full-match regex.

    The result uses only literals, classes, ``[^/]``, ``[^/]*``, ``.*`` and ``(?:.*/)?``,
    with ``.`` matching newlines too (``(?s)``), so it means the same in RE2 and ``re``.
    """
    out: list[str] = ["(?s)"]
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
            if out[-1] != "[^/]*":  # '**' inside a segment, or '***': one star's worth
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
                out.append(_literal(char))
            else:
                out.append(_glob_class(pattern[i + 1 : j]))
                i = j
        else:
            out.append(_literal(char))
        i += 1
    return "".join(out)


def _glob_class(body: str) -> str:
    negated = body[:1] in ("!", "^")
    if negated:
        body = body[1:]
    # Backslash and '[' are literal in a glob class; escaped, no engine reads them as
    # an escape or a POSIX class ('[:alpha:]').
    body = body.replace("\\", "\\\\").replace("[", "\\[")
    if body.startswith("]"):
        body = "\\" + body
    return f"[{'^' if negated else ''}{body}]"


class UnsafeGlobError(WorkspaceToolError):
    """A glob too long to match safely, or one RE2 refuses."""


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class GlobMatcher:
    """One compiled glob; :meth:`fullmatch` takes a ``/``-separated relative path."""

    __slots__ = ("_regex",)

    def __init__(self, regex: re2._Regexp) -> None:
        self._regex = regex

    def fullmatch(self, rel: str) -> bool:
        return self._regex.fullmatch(_encode(rel)) is not None


def _check_glob_size(glob: str, what: str) -> None:
    if len(glob) > MAX_GLOB_CHARS:
        raise UnsafeGlobError(
            f"{what} {show(glob)} is longer than {MAX_GLOB_CHARS} characters, "
            "too long to match safely"
        )


def compile_regex(regex: str, glob: str, what: str = "glob") -> GlobMatcher:
    """Compile a regex made by :func:`glob_to_regex` (``glob`` is named in errors)."""
    _check_glob_size(glob, what)
    try:
        return GlobMatcher(re2.compile(_encode(regex), _options()))
    except re2.error as exc:
        raise UnsafeGlobError(
            f"{what} {show(glob)} cannot be matched: {_re2_message(exc)}"
        ) from None


def compile_glob(glob: str, what: str = "glob") -> GlobMatcher:
    """Compile a glob for full matches against relative paths."""
    return compile_regex(glob_to_regex(glob), glob, what)


_SET_MAX_BYTES = 8 * 1024  # rules per RE2 set: past some size RE2 refuses the set


class GlobSet:
    """Many full-match regexes (from :func:`glob_to_regex`) matched in few passes.

    Rules are grouped into RE2 sets of at most ``_SET_MAX_BYTES`` of patterns each, so a
    ``.gitignore`` costs one pass per group, and a huge one is never refused whole (nor
    makes RE2 log to stderr). :meth:`add` refuses (with :class:`UnsafeGlobError`) a rule
    that is too long or that RE2 cannot compile; the set stays usable without it.
    :meth:`matches` returns the indices, in :meth:`add` order, of the rules that match.
    Groups are compiled on first use, or by :meth:`compile`, and again after a later
    :meth:`add`.
    """

    __slots__ = ("_groups", "_regexes")

    def __init__(self) -> None:
        self._regexes: list[bytes] = []
        self._groups: list[tuple[int, re2.Set]] | None = None  # (first index, set)

    def __len__(self) -> int:
        return len(self._regexes)

    def add(self, regex: str, glob: str, what: str = "rule") -> int:
        _check_glob_size(glob, what)
        encoded = _encode(regex)
        try:
            re2.compile(encoded, _options())  # a clear error for this rule alone
        except re2.error as exc:
            raise UnsafeGlobError(
                f"{what} {show(glob)} cannot be matched: {_re2_message(exc)}"
            ) from None
        self._regexes.append(encoded)
        self._groups = None
        return len(self._regexes) - 1

    def compile(self) -> None:
        """Build the RE2 sets now (each rule compiled alone already, so each set does)."""
        groups: list[tuple[int, re2.Set]] = []
        first, size = 0, 0
        for index, regex in enumerate(self._regexes):
            if index > first and size + len(regex) > _SET_MAX_BYTES:
                groups.append((first, self._group(first, index)))
                first, size = index, 0
            size += len(regex)
        if first < len(self._regexes):
            groups.append((first, self._group(first, len(self._regexes))))
        self._groups = groups

    def _group(self, start: int, stop: int) -> re2.Set:
        compiled = re2.Set.FullMatchSet(_options())
        try:
            for regex in self._regexes[start:stop]:
                compiled.Add(regex)
            compiled.Compile()
        except re2.error as exc:
            raise UnsafeGlobError(f"the rules cannot be matched: {_re2_message(exc)}") from None
        return compiled

    def matches(self, rel: str) -> Sequence[int]:
        if not self._regexes:
            return ()
        if self._groups is None:
            self.compile()
        assert self._groups is not None
        text = _encode(rel)
        found: list[int] = []
        for first, compiled in self._groups:
            hits: list[int] | None = compiled.Match(text)
            if hits:
                found.extend(first + hit for hit in hits)
        return found
