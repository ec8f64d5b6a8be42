"""A command's output as ``builtin/shell`` keeps it: the head and the tail of each stream.

:class:`Capture` keeps a stream's first ``cap`` bytes and its last ``cap // 2``, and is
readable at any time, so a drain cut off (a timeout, a pipe held open by a background
job) still gives what it read. The output cap is ``max_shell_output_bytes``
(``docs/security.md`` §2.2).
"""

from __future__ import annotations

import asyncio

import attrs

_CHUNK = 65536
_PARTIAL_CHARS = 2000


@attrs.define(slots=True)
class Captured:
    """What a stream's output comes to: its text, its full size, and whether it was cut."""

    text: str
    total_bytes: int
    truncated: bool


class Capture:
    """One stream's first ``cap`` bytes and last ``cap // 2``; readable at any time, so a
    drain cut off (timeout, a pipe held open) still gives what it read."""

    __slots__ = ("cap", "first", "tail", "total")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.first = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.first)
        if room > 0:
            self.first += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            half = self.cap // 2
            if len(self.tail) > half:
                del self.tail[: len(self.tail) - half]

    def result(self) -> Captured:
        cap, first, tail, total = self.cap, self.first, self.tail, self.total
        if total <= cap:
            return Captured(first.decode("utf-8", "replace"), total, False)
        half = cap // 2
        whole = first + tail if total - cap <= half else None
        head = first[: cap - half]
        last = whole[-half:] if whole is not None and half else tail
        marker = f"\n[... {total - cap} bytes omitted: output over {cap} bytes ...]\n"
        text = head.decode("utf-8", "replace") + marker + bytes(last).decode("utf-8", "replace")
        return Captured(text, total, True)


async def drain(stream: asyncio.StreamReader | None, capture: Capture) -> None:
    """Read a stream to EOF into ``capture``."""
    if stream is None:
        return
    while chunk := await stream.read(_CHUNK):
        capture.feed(chunk)


def partial(capture: Capture, name: str) -> str:
    """The end of what ``capture`` holds, for the message of a command that failed."""
    text = capture.result().text
    if not text:
        return ""
    return f"\n{name} (last {_PARTIAL_CHARS} characters):\n{text[-_PARTIAL_CHARS:]}"
