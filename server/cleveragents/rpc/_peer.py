"""The connection seen from the run manager: notify, request, cancel a request, progress,
and pace (backpressure).

The dispatcher implements it; the run manager never sees JSON-RPC framing.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ..protocol import BY_NAME, RpcError, structure, unstructure
from ..tool import JsonRpcCode


class Peer(Protocol):
    def notify_json(self, method: str, params_text: str) -> None:
        """Send a notification whose params are already JSON text."""
        ...

    def request(self, method: str, params: Any) -> tuple[str, asyncio.Future[Any]]:
        """Send a request; returns its id and a future for the result (or a
        ``RpcError``)."""
        ...

    def cancel_request(self, msg_id: str, extra: dict[str, Any] | None = None) -> None:
        """Send ``$/cancelRequest`` for one of our requests; ``extra`` adds fields beside
        ``id`` (``runId`` and ``callId`` for ``tools/call``)."""
        ...

    def progress(self, token: str | int, kind: str, message: str, percentage: int | None) -> None:
        """Work-done progress: ``kind`` is begin, report or end."""
        ...

    async def pace(self) -> None:
        """Wait while the client is not reading what was already sent."""
        ...


class CurrentPeer:
    """The peer of whichever connection is the daemon's client now (TCP connections come
    and go before one authenticates); before any, requests fail and output is dropped."""

    def __init__(self) -> None:
        self.target: Peer | None = None

    def notify_json(self, method: str, params_text: str) -> None:
        if self.target is not None:
            self.target.notify_json(method, params_text)

    def request(self, method: str, params: Any) -> tuple[str, asyncio.Future[Any]]:
        if self.target is not None:
            return self.target.request(method, params)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_exception(RpcError(JsonRpcCode.INTERNAL_ERROR, "no client is connected"))
        return "", future

    def cancel_request(self, msg_id: str, extra: dict[str, Any] | None = None) -> None:
        if self.target is not None:
            self.target.cancel_request(msg_id, extra)

    def progress(self, token: str | int, kind: str, message: str, percentage: int | None) -> None:
        if self.target is not None:
            self.target.progress(token, kind, message, percentage)

    async def pace(self) -> None:
        if self.target is not None:
            await self.target.pace()


async def call_peer(
    peer: Peer, method: str, params: Any, cancel_extra: dict[str, Any] | None = None
) -> Any:
    """One request to the peer, whose reply is structured through the method table's
    result type: the typed result, ``RpcError`` for an error reply, ``ParamsError``
    naming the field for a malformed one. A cancel of the caller cancels the request
    (``cancel_extra`` adds fields to the cancel, e.g. a tool call's run and call ids)."""
    msg_id, future = peer.request(method, unstructure(params))
    try:
        reply = await future
    except asyncio.CancelledError:
        peer.cancel_request(msg_id, cancel_extra)
        raise
    result_type = BY_NAME[method].result
    assert result_type is not None, f"{method} is a notification"
    return structure(reply, result_type, root="result")
