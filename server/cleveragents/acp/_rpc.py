"""ACP's JSON-RPC: the daemon's guarded dispatcher, with newline-delimited messages.

Everything JSON-RPC (strict parsing, the envelope checks, nesting and Unicode rules, one
answer per request, the daemon's own outgoing-id table) is the daemon's
:class:`~cleveragents.daemon._dispatch.Dispatcher`. What differs for ACP is only here:

* a message is one line of JSON text ending in ``\\n`` (JSON text never holds a raw
  newline, so nothing needs escaping);
* a line is at most :data:`MAX_LINE` bytes, the TypeScript SDK's own read limit: a
  longer line is skipped as it is read and answered PARSE_ERROR (see :func:`read_lines`);
* cancelling a request is ``$/cancel_request {requestId}``, in both directions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from ..protocol import dumps
from ..rpc import Dispatcher, FrameSink, Handlers
from ..tool import JsonRpcCode

logger = logging.getLogger(__name__)

MAX_LINE = 32 * 1024 * 1024
"""The longest line read or written (the TypeScript SDK reads lines up to 32 MiB)."""
CANCEL_REQUEST = "$/cancel_request"

_CHUNK = 256 * 1024


def line(text: str) -> bytes:
    """One message on the wire."""
    return text.encode("utf-8") + b"\n"


class OversizedLine:
    """Marks a line that was skipped for being over the limit (its length in bytes)."""

    def __init__(self, size: int) -> None:
        self.size = size


async def read_lines(
    reader: asyncio.StreamReader, max_line: int = MAX_LINE
) -> AsyncIterator[bytes | OversizedLine]:
    """The lines of ``reader`` without their ``\\n`` (a ``\\r`` before it is dropped too);
    a line over ``max_line`` bytes is dropped as it arrives (memory stays bounded) and
    reported as :class:`OversizedLine`. A last line without ``\\n`` counts."""
    buffer = bytearray()
    skipped = -1  # >= 0 while skipping an oversized line: the bytes dropped so far
    while True:
        chunk = await reader.read(_CHUNK)
        if not chunk:
            if skipped >= 0:
                yield OversizedLine(skipped + len(buffer))
            elif buffer.strip():
                yield bytes(buffer)
            return
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                piece = chunk[start:]
                if skipped >= 0:
                    skipped += len(piece)
                else:
                    buffer += piece
                    if len(buffer) > max_line:
                        skipped = len(buffer)
                        buffer.clear()
                break
            piece = chunk[start:end]
            if skipped >= 0:
                yield OversizedLine(skipped + len(piece))
                skipped = -1
            elif len(buffer) + len(piece) > max_line:
                yield OversizedLine(len(buffer) + len(piece))
                buffer.clear()
            else:
                buffer += piece
                message = bytes(buffer).rstrip(b"\r")
                buffer.clear()
                if message.strip():
                    yield message
            start = end + 1


class AcpDispatcher(Dispatcher):
    """The daemon's dispatcher on ACP's framing and cancel method."""

    def __init__(self, handlers: Handlers, sink: FrameSink) -> None:
        super().__init__(
            handlers, sink, frame=line, max_frame=MAX_LINE + 1,
            not_initialized=JsonRpcCode.INVALID_REQUEST,
        )  # fmt: skip

    def receive_line(self, item: bytes | OversizedLine) -> None:
        """One line from :func:`read_lines`. Never raises."""
        if isinstance(item, OversizedLine):
            text = f"parse error: a {item.size}-byte line is over the {MAX_LINE}-byte limit"
            body = {"code": int(JsonRpcCode.PARSE_ERROR), "message": text}
            error = {"jsonrpc": "2.0", "id": None, "error": body}
            self._sink.write(line(dumps(error)))
            return
        self.receive(item)

    def _notification(self, method: str, params: Any) -> None:
        if method == CANCEL_REQUEST:
            request_id = params.get("requestId") if isinstance(params, dict) else None
            # The dispatcher's own cancel: the handler's task is cancelled; the prompt
            # handler then ends its run cleanly and the request answers REQUEST_CANCELLED.
            super()._notification("$/cancelRequest", {"id": request_id})
            return
        super()._notification(method, params)

    def cancel_request(self, msg_id: str, extra: dict[str, Any] | None = None) -> None:
        if self._outgoing.pop(msg_id, None) is not None:
            self.notify(CANCEL_REQUEST, {"requestId": msg_id})
