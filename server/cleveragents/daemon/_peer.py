"""The connection seen from the run manager: notify, request, cancel a request, progress.

The pygls server implements it; the run manager never imports pygls.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class PeerRequestError(Exception):
    """The client answered a daemon->client request with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message


class Peer(Protocol):
    def notify_json(self, method: str, params_text: str) -> None:
        """Send a notification whose params are already JSON text."""
        ...

    def request(self, method: str, params: dict[str, Any]) -> tuple[str, asyncio.Future[Any]]:
        """Send a request; returns its id and a future for the result (or a
        ``PeerRequestError``)."""
        ...

    def cancel_request(self, msg_id: str) -> None: ...

    def progress(self, token: str | int, kind: str, message: str, percentage: int | None) -> None:
        """Work-done progress: ``kind`` is begin, report or end."""
        ...
