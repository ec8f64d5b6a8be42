"""LSP base framing: ``Content-Length: N`` header, blank line, N bytes of UTF-8 JSON.

Shared by the daemon's transport and the Python client, so that both sides frame and
unframe exactly alike. Works on any asyncio ``StreamReader``; knows no method.

The reading side owns recovery from bad input. A header part that cannot be read (no
``Content-Length``, a negative, non-numeric or oversized one, two that disagree, a line
or a header part with no end in sight) is logged as a warning on the
``cleveragents.protocol`` logger and skipped: the reader then hunts for the next
``Content-Length:`` in the byte stream, wherever it starts (also mid-line, right behind
garbage), and reads on from there. Every buffer is bounded: a header part by
``MAX_HEADER``, a body by ``MAX_BODY``, and skipped bytes are dropped as they are read.
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref
from typing import Any

from ._converter import dumps

logger = logging.getLogger("cleveragents.protocol")

MAX_BODY = 64 * 1024 * 1024
"""The largest body accepted; a larger Content-Length is treated as a bad header."""

MAX_HEADER = 8 * 1024
"""The largest header part accepted (LSP headers are a few dozen bytes)."""

_CHUNK = 64 * 1024
# Where a header part may start again: the header name, anywhere in the stream.
_MARKER = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
# While hunting for the marker, keep this many trailing bytes: a marker may be split
# across two reads.
_TAIL = 64
_DIGITS = re.compile(rb"[0-9]+")
_NEGATIVE = re.compile(rb"-[0-9]+")
# Bytes of a bad header part shown in the log (its first line at most): enough to
# recognise it, never a body.
_SHOWN = 32


def encode_frame(body: str) -> bytes:
    """Frame JSON text; the length counts UTF-8 bytes, not characters."""
    data = body.encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(data), data)


def frame(message: dict[str, Any]) -> bytes:
    return encode_frame(dumps(message))


def fits(body: bytes, max_body: int = MAX_BODY) -> bool:
    """Whether a peer reading with this limit accepts ``body`` (UTF-8 bytes) as one frame."""
    return len(body) <= max_body


class _Bad:
    """A header part that cannot be read: why, and where the hunt for the next one starts
    (an offset into the buffer, past the offending line)."""

    __slots__ = ("reason", "resume")

    def __init__(self, reason: str, resume: int) -> None:
        self.reason = reason
        self.resume = resume


class FrameReader:
    """Reads one frame body per call from an asyncio stream, recovering from bad headers.

    It keeps its own buffer, so once a stream is read through a ``FrameReader`` it must
    be read only through that reader. Not for concurrent use (neither is the stream).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        max_body: int = MAX_BODY,
        max_header: int = MAX_HEADER,
    ) -> None:
        self._reader = reader
        self._max_body = max_body
        self._max_header = max_header
        self._buffer = bytearray()
        # Body length once its header part has been consumed; kept across calls so that
        # a cancelled read() resumes mid-body instead of mistaking the body for a header.
        self._length: int | None = None
        self._hunting = False
        self._skipped = 0
        self._eof = False
        # Progress through a header part that is not complete yet: the offset of the
        # next line, whether a header line was seen, the Content-Length seen.
        self._scan = 0
        self._started = False
        self._seen: int | None = None

    async def read(self) -> bytes | None:
        """The next message body; ``None`` at end of input (also inside a cut frame)."""
        buffer = self._buffer
        while True:
            if self._length is not None:
                if len(buffer) >= self._length:
                    body = bytes(buffer[: self._length])
                    del buffer[: self._length]
                    self._length = None
                    return body
                if not await self._fill(self._length - len(buffer)):
                    logger.warning(
                        "input ended inside a frame body (%d of %d bytes)",
                        len(buffer), self._length,
                    )  # fmt: skip
                    return None
                continue
            if self._hunting:
                if self._hunt():
                    continue
            else:
                header = self._header()
                if isinstance(header, int):
                    self._length = header
                    continue
                if isinstance(header, _Bad):
                    shown = bytes(buffer[:_SHOWN]).partition(b"\n")[0]
                    logger.warning(
                        "skipping a bad frame header (%s): %r; resynchronising at the "
                        "next Content-Length",
                        header.reason, shown,
                    )  # fmt: skip
                    del buffer[: header.resume]
                    self._skipped = header.resume
                    self._hunting = True
                    continue
            if not await self._fill(_CHUNK):
                if not self._hunting and buffer.strip():
                    logger.warning("input ended inside a frame header (%d bytes)", len(buffer))
                return None

    async def _fill(self, wanted: int) -> bool:
        """Append what the stream has (up to ``wanted`` bytes, at least one); False at EOF."""
        if self._eof:
            return False
        chunk = await self._reader.read(max(wanted, 1))
        if not chunk:
            self._eof = True
            return False
        self._buffer.extend(chunk)
        return True

    def _hunt(self) -> bool:
        """Drop bytes up to the next ``Content-Length:``; True when one heads the buffer."""
        buffer = self._buffer
        found = _MARKER.search(buffer)
        if found is None:
            drop = max(len(buffer) - _TAIL, 0)
            del buffer[:drop]
            self._skipped += drop
            return False
        del buffer[: found.start()]
        self._skipped += found.start()
        logger.info("resynchronised after skipping %d bytes", self._skipped)
        self._hunting = False
        self._skipped = 0
        return True

    def _header(self) -> int | _Bad | None:
        """Parse the header part at the buffer's start: its body length (the header part
        consumed), a ``_Bad``, or None when more bytes are needed. Lines already parsed
        are not parsed again when more bytes arrive (a header trickled byte by byte
        costs linear time)."""
        buffer = self._buffer
        limit = self._max_header
        while True:
            pos = self._scan
            end = buffer.find(b"\n", pos)
            if end < 0:
                if len(buffer) - pos > limit:
                    return self._bad(f"a header line with no end in {limit} bytes", 1)
                if len(buffer) > limit:
                    return self._bad(f"a header part with no end in {limit} bytes", 1)
                return None
            if end - pos > limit:
                return self._bad(f"a header line over {limit} bytes", 1)
            if end >= limit:
                return self._bad(f"a header part over {limit} bytes", 1)
            line = bytes(buffer[pos:end]).rstrip(b"\r")
            self._scan = pos = end + 1
            if not line:
                if self._started:
                    break
                # Blank lines between frames are harmless (hand-written clients send them).
                del buffer[:pos]
                self._scan = 0
                continue
            self._started = True
            name, _, value = line.partition(b":")
            if name.strip().lower() != b"content-length":
                continue  # Content-Type and unknown headers are ignored
            value = value.strip(b" \t")
            if _NEGATIVE.fullmatch(value):
                return self._bad("a negative Content-Length", pos)
            if not _DIGITS.fullmatch(value):
                return self._bad("a Content-Length that is not a number", pos)
            # Compare digit counts first: no int is built from a million digits.
            if len(value) > len(str(self._max_body)) or int(value) > self._max_body:
                return self._bad(f"a Content-Length over the {self._max_body}-byte limit", pos)
            if self._seen is not None and int(value) != self._seen:
                return self._bad("two Content-Length headers that disagree", pos)
            self._seen = int(value)
        length = self._seen
        if length is None:
            # Restart one byte in: a Content-Length glued behind garbage on the same
            # line ("garbageContent-Length: 5") is the frame to recover.
            return self._bad("no Content-Length", 1)
        del buffer[: self._scan]
        self._reset_scan()
        return length

    def _bad(self, reason: str, resume: int) -> _Bad:
        self._reset_scan()
        return _Bad(reason, resume)

    def _reset_scan(self) -> None:
        self._scan = 0
        self._started = False
        self._seen = None


# One FrameReader per stream for read_body's callers, so that bytes read ahead are kept
# between calls; it goes with its stream.
_readers: weakref.WeakKeyDictionary[asyncio.StreamReader, FrameReader] = weakref.WeakKeyDictionary()


async def read_body(reader: asyncio.StreamReader, max_body: int = MAX_BODY) -> bytes | None:
    """The next message body from ``reader``; ``None`` at end of input (or a body cut
    short). Bad header parts are logged and skipped (see ``FrameReader``); once read
    this way, a stream must be read only through ``read_body``, and the ``max_body`` of
    the first call holds for the stream."""
    framer = _readers.get(reader)
    if framer is None:
        framer = _readers[reader] = FrameReader(reader, max_body)
    return await framer.read()
