"""LSP base framing: ``Content-Length: N`` header, blank line, N bytes of UTF-8 JSON.

Shared by the daemon's transport and the Python client, so that both sides frame and
unframe exactly alike. Works on any asyncio ``StreamReader``; knows no method.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._converter import dumps

MAX_BODY = 64 * 1024 * 1024
"""The largest body accepted; a larger Content-Length is treated as a bad header."""


def encode_frame(body: str) -> bytes:
    """Frame JSON text; the length counts UTF-8 bytes, not characters."""
    data = body.encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(data), data)


def frame(message: dict[str, Any]) -> bytes:
    return encode_frame(dumps(message))


async def read_body(reader: asyncio.StreamReader, max_body: int = MAX_BODY) -> bytes | None:
    """The next message body; ``None`` at end of input (or a body cut short). Header
    lines other than a valid Content-Length are skipped."""
    length: int | None = None
    while True:
        line = await reader.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            if length is not None:
                break
            continue
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                length = None
            if length is not None and not 0 <= length <= max_body:
                length = None
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        return None
