"""Keeping keys and URL credentials out of what leaves the provider adapters: the text
of their errors and the log records of the HTTP stack under them.

Owns:
- :class:`Redactor`: cuts a key, and every word that shares :data:`MIN_FRAGMENT` or more
  consecutive characters with it. Providers echo keys whole, masked (``pat-ca...6xyz``)
  or cut short (a 14-character prefix), so matching the whole key is not enough; a word
  is cut whole, so the short tail of a mask goes with the part that matched;
- :func:`scrub_urls`: a URL's ``user:password@`` and query string;
- the process-wide set of secrets known to the log filter, and the filter itself, which
  :func:`guard_logs` puts on every logger of the SDKs and the HTTP stack under them
  (``httpx2`` logs each request URL at INFO; ``httpcore2`` logs response headers and
  refused request headers at DEBUG).

Deliberately knows no SDK and no provider's error shape: the SDKs' logger names come
from the provider registrations (``_providers``), ``_retry`` decides what text to show,
and this module only cuts. Every pattern here runs in linear time, so a hostile error
body or log line cannot stall the daemon; callers bound error text before cutting it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

import attrs

from ._providers import providers

MIN_FRAGMENT = 6
"""The shortest run of a key's characters that is recognised, and cut, anywhere."""

REDACTED = "[redacted]"

# A "word": a run of anything but blanks, quotes, brackets and separators. Masks
# (``...``, ``…``, ``***``) and key punctuation (``-_.:/+=``) stay inside one word.
_DELIMITERS = r"\s\"'`<>()\[\]{},;|\\"
_WORD = re.compile(f"[^{_DELIMITERS}]{{{MIN_FRAGMENT},}}")
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9*_.\-]{4,}")  # OpenAI and Anthropic key shapes
# The scheme is bounded so that no start position costs more than a few steps.
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://)[^/\s@\"'<>]*@")
_QUERY = re.compile(r"(/[^\s\"'<>?#/]*)\?[^\s\"'<>#]*")


@attrs.frozen
class Redactor:
    """Cuts the given secrets, and every word sharing a fragment of one, out of text."""

    secrets: tuple[str, ...] = ()
    windows: frozenset[str] = frozenset()

    @classmethod
    def of(cls, secrets: Iterable[str]) -> Redactor:
        """Secrets longest first, so a key that contains another is cut whole."""
        kept = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        windows = {
            s.lower()[i : i + MIN_FRAGMENT] for s in kept for i in range(len(s) - MIN_FRAGMENT + 1)
        }
        return cls(kept, frozenset(windows))

    def __call__(self, text: str) -> str:
        # URLs first, so that a URL whose password or query matched is not cut whole.
        text = scrub_urls(text)
        if self.windows:
            text = _WORD.sub(self._cut_word, text)
        # Whole secrets last: those too short for a fragment, or split by a delimiter.
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return _KEY_LIKE.sub(REDACTED, text)

    def _cut_word(self, match: re.Match[str]) -> str:
        word = match.group()
        low = word.lower()
        windows = self.windows
        for i in range(len(low) - MIN_FRAGMENT + 1):
            if low[i : i + MIN_FRAGMENT] in windows:
                return REDACTED
        return word


def scrub_urls(text: str) -> str:
    """Replace every URL's ``user:password@`` and every query string after a path."""
    text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    return _QUERY.sub(rf"\1?{REDACTED}", text)


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The parts of a ``baseUrl`` that are credentials: its password and the query's
    values, those long enough to be recognised as fragments."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL the SDK would accept either
        return ()
    values = [value for _, value in parse_qsl(parts.query, keep_blank_values=False)]
    return tuple(s for s in (password or "", *values) if len(s) >= MIN_FRAGMENT)


# The secrets the log filter knows: every key and baseUrl credential an adapter used.
# Replaced whole under the lock, read without it.
_known = Redactor()
_known_lock = threading.Lock()


def remember(secrets: Iterable[str]) -> None:
    """Make the log filter cut these secrets (and their fragments) from now on."""
    global _known
    new = {s for s in secrets if s} - set(_known.secrets)
    if not new:
        return
    with _known_lock:
        _known = Redactor.of((*_known.secrets, *new))


def scrub_log_text(text: str) -> str:
    """What the log filter does to a message: known secrets, userinfo and queries."""
    return _known(text)


class _ScrubRecords(logging.Filter):
    """Rewrites a record's message (and traceback) before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError, KeyError):
            # logging would print the raw arguments when it failed to format them
            message = f"{record.msg} [arguments dropped: they did not format]"
        clean = scrub_log_text(message)
        if clean != message or record.args:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = scrub_log_text(_FORMATTER.formatException(record.exc_info))
            record.exc_info = None  # so that no handler formats the raw one again
        elif record.exc_text:
            record.exc_text = scrub_log_text(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub_log_text(record.stack_info)
        return True


_FILTER = _ScrubRecords()
_FORMATTER = logging.Formatter()


def log_scrubber() -> logging.Filter:
    """The scrubbing filter, for a process's log handlers: on a handler it sees every
    record that handler writes, whatever logger made it (an MCP SDK's, the HTTP stack's,
    ours), from the first line on. Known secrets, URL userinfo and query strings go."""
    return _FILTER


HTTP_STACK = ("httpx2", "httpcore2", "httpx", "httpcore", "h11", "h2")
"""Top-level logger names of the HTTP stack under the SDKs (the SDKs' own are in their
provider registrations)."""

_MODULE_LOGGERS = (
    "httpcore2.connection",
    "httpcore2.http11",
    "httpcore2.http2",
    "httpcore2.proxy",
    "httpcore2.socks",
)
"""Loggers the stack creates per module, named here so that they are guarded even before
their module is imported (a logger's filters see only records made on that logger, not
on its children)."""


def guarded_loggers() -> set[str]:
    """The logger names :func:`guard_logs` guards by name: the HTTP stack's, and those
    of every registered provider (``Provider.loggers``)."""
    names = {*HTTP_STACK, *_MODULE_LOGGERS}
    for provider in providers():
        names.update(provider.loggers)
    return names


def guard_logs() -> None:
    """Put the scrubbing filter on every logger named by :func:`guarded_loggers`, and on
    every existing logger below one of their top-level names. Idempotent; call it after
    importing an SDK."""
    names = guarded_loggers()
    roots = {name.split(".", 1)[0] for name in names}
    names.update(n for n in list(logging.Logger.manager.loggerDict) if n.split(".", 1)[0] in roots)
    for name in names:
        logging.getLogger(name).addFilter(_FILTER)
