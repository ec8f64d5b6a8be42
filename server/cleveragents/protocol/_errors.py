"""``RpcError``: a JSON-RPC error as a value, the one class every face and client uses.

Raised by a handler, it is the error reply (its code and plain message, never a
traceback); raised by a request to the peer, it is the peer's error reply; raised by a
client, the daemon's. ``data`` is JSON-RPC's optional ``data`` member.
"""

from __future__ import annotations

from typing import Any


class RpcError(Exception):
    """A JSON-RPC error: ``code``, ``message`` and optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)  # a JsonRpcCode goes on the wire as the plain integer
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"
