"""The regexes of JSON Schemas, matched in linear time: ``pattern``, ``patternProperties``,
``format`` and the ``regex`` format.

A schema may come from outside (an MCP server, an editor's client tool), and so may the
value it checks (a model's arguments, a server's answer). Python's ``re`` backtracks:
``^(a+)+$`` against 30 characters takes seconds, doubling with each more, and even
fastjsonschema's own ``email`` format is quadratic. So every regex a validator runs is
compiled with RE2 (the ``google-re2`` package), which matches in time linear in the
text whatever the pattern. A schema pattern RE2 cannot run (a backreference, a
lookaround) is refused with :class:`UnsupportedPattern`, naming it.

Matching is on UTF-8 bytes (a lone surrogate, which JSON allows, is encoded as is), with
RE2's syntax, which is what JSON Schema's ECMA-262 regexes mean for everything RE2 has:
``$`` is the end of the text, not before a last newline as in Python. ``\\d``, ``\\w``
and ``\\b`` are ASCII only.

It does not know fastjsonschema's code generator (``_schema_guard`` does) or specs.
"""

from __future__ import annotations

from typing import Any

import re2  # google-re2 ships no stubs; mypy is told to ignore it (pyproject)

PATTERN_MAX_MEM = 1024 * 1024
"""RE2's memory budget per compiled schema regex: a program larger than about two thirds
of it is refused when compiled, and matching falls back to a slower (still linear)
engine rather than exceed it. Typical schema patterns need a few KiB."""


class UnsupportedPattern(Exception):
    """A schema regex RE2 cannot compile; ``reason`` says why, in words."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(f"{pattern!r}: {reason}")
        self.pattern = pattern
        self.reason = reason


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 must not write to the daemon's stderr
    options.never_capture = True  # only "does it match" is asked: lets RE2 use its DFA
    options.max_mem = PATTERN_MAX_MEM
    return options


class Pattern:
    """One compiled regex; ``search(text)`` says whether it matches anywhere in ``text``.

    The shape fastjsonschema's generated code calls (``REGEX_PATTERNS[p].search(v)``)."""

    __slots__ = ("_regex", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        try:
            self._regex = re2.compile(pattern.encode("utf-8", "surrogatepass"), _options())
        except re2.error as exc:
            raise UnsupportedPattern(pattern, _reason(pattern, exc)) from None

    def search(self, text: str) -> bool:
        return self._regex.search(text.encode("utf-8", "surrogatepass")) is not None

    def __repr__(self) -> str:
        return f"Pattern({self.pattern!r})"


class RegexFormat:
    """The ``regex`` format's check, as the generated code spells it (``re.compile(v)``
    inside a ``try``): a value is a valid regex when RE2 compiles it."""

    @staticmethod
    def compile(text: str) -> None:
        Pattern(text)


_CONSTRUCTS = (
    ("(?<=", "a lookbehind"),
    ("(?<!", "a lookbehind"),
    ("(?=", "a lookahead"),
    ("(?!", "a lookahead"),
    ("(?>", "an atomic group"),
    ("(?P=", "a backreference"),
)


def _reason(pattern: str, exc: BaseException) -> str:
    construct = _unsupported_construct(pattern)
    if construct is not None:
        return (
            f"it uses {construct}, which a linear-time engine cannot run "
            "(schema patterns are matched with RE2)"
        )
    detail = exc.args[0] if exc.args else ""
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    return f"RE2 cannot compile it ({detail or 'no reason given'})"


def _unsupported_construct(pattern: str) -> str | None:
    """The first construct of ``pattern`` that RE2 lacks, in words (outside classes)."""
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            if pattern[i + 1] in "123456789" or pattern.startswith("k<", i + 1):
                return f"a backreference ({pattern[i : i + 3]})"
            i += 2
            continue
        if char == "[":
            i = _skip_class(pattern, i)
            continue
        if char == "(":
            for token, name in _CONSTRUCTS:
                if pattern.startswith(token, i):
                    return f"{name} ({token})"
        i += 1
    return None


def _skip_class(pattern: str, start: int) -> int:
    i, n = start + 1, len(pattern)
    if i < n and pattern[i] == "^":
        i += 1
    if i < n and pattern[i] == "]":
        i += 1
    while i < n and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


# Python's \s (str.isspace), for the formats that say "no whitespace": RE2's \s is ASCII.
_SPACE = r"\t-\r\x1c-\x20\x85\p{Z}"
_DATE = r"(?:\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_V4 = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_V4})"
_IPV6 = "|".join(
    [
        rf"(?:{_H16}:){{6}}{_LS32}",
        rf"::(?:{_H16}:){{5}}{_LS32}",
        rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
        rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
        rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
        rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
        rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
        rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
        rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
    ]
)
_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])"
_DURATION_TIME = r"T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DURATION_DATE = r"(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_IDN_TAIL = r"(?:[a-zA-Z0-9\-]{1,50}|[a-zA-Z0-9-]{1,30}\.[a-zA-Z]{2,})"
_IDN_TAIL_NO_DASH = (
    r"(?:[a-zA-Z0-9][a-zA-Z0-9\-]{0,49}|[a-zA-Z0-9][a-zA-Z0-9-]{0,29}\.[a-zA-Z]{2,})"
)

FORMATS: dict[str, str] = {
    "date-time": (
        rf"^{_DATE}[tT](?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d+)?"
        r"(?:[+-](?:[01]\d|2[0-3]):[0-5]\d|[+-](?:[01]\d|2[0-3])[0-5]\d|z|Z)\z"
    ),
    # fastjsonschema's lookarounds, unrolled: no ".." before the @, the local part
    # neither starts nor ends with a dot, one @, a dot inside the domain.
    "email": r"^[^@.](?:[^@.]|\.[^@.])*@[^@]+\.[^@]+\z",
    "hostname": rf"^(?:{_LABEL}\.)*{_LABEL}\z",
    "ipv4": rf"^{_V4}\z",
    "ipv6": rf"^(?:{_IPV6})\z",
    "uri": rf"^\w+:(?:/?/?)[^{_SPACE}]+\z",
    "json-pointer": r"^(?:/(?:[^/~]|~[01])*)*\z",
    "uri-reference": rf"^(?:\w+:(?:/?/?))?[^#\\{_SPACE}]*(?:#[^\\{_SPACE}]*)?\z",
    "uri-template": (
        r"^(?:(?:[^\x00-\x20\"'<>%\\^`{|}]|%[0-9a-f]{2})|"
        r"\{[+#./;?&=,!@|]?(?:[a-z0-9_]|%[0-9a-f]{2})+"
        r"(?::[1-9][0-9]{0,3}|\*)?(?:,(?:[a-z0-9_]|%[0-9a-f]{2})+"
        r"(?::[1-9][0-9]{0,3}|\*)?)*\})*\z"
    ),
    "date": rf"^{_DATE}\z",
    "iri": rf"^\w+:(?:/?/?)[^{_SPACE}]+\z",
    "iri-reference": rf"^(?:\w+:(?:/?/?))?[^#\\{_SPACE}]*(?:#[^\\{_SPACE}]*)?\z",
    "idn-email": r"^[^@]+@[^@]+\.[^@]+\z",
    # Its "(?!-)" lookaheads unrolled: the label after the dot may start with a dash
    # only behind "xn--".
    "idn-hostname": (
        r"^(?:xn--)?[a-zA-Z0-9][a-zA-Z0-9\-_]{0,61}[a-zA-Z0-9]?\."
        rf"(?:xn--{_IDN_TAIL}|{_IDN_TAIL_NO_DASH})\z"
    ),
    "relative-json-pointer": r"^(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~0|~1)*)*)\z",
    "time": (
        r"^(?:[01]?\d|2[0-3]):(?:[0-5]?\d)"
        r"(?::(?:[0-5]?\d|60)(?:\.\d{1,6})?([zZ]|[+-](?:[01]\d|2[0-3]):[0-5]\d)?)?\z"
    ),
    "uuid": r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\z",
    "duration": rf"^P(?:[0-9]+W|{_DURATION_DATE}(?:{_DURATION_TIME})?|{_DURATION_TIME})\z",
}
"""fastjsonschema's formats (draft 4 to 2019-09), rewritten for RE2: each accepts what
fastjsonschema's Python regex accepts, on ASCII text (a test compares them)."""


def format_pattern(name: str, fallback: str) -> Pattern | None:
    """The RE2 check of format ``name``. A format this table does not know (a newer
    fastjsonschema's) is checked with its own regex when RE2 can run it, else not at
    all: formats are annotations unless a validator chooses to assert them."""
    try:
        return Pattern(FORMATS[name] if name in FORMATS else fallback.replace(r"\Z", r"\z"))
    except UnsupportedPattern:
        return None
