"""Keeping one SDK client, and so one connection pool, per caller and event loop.

Owns the clients' lifetime: a client is made on a loop's first call, reused by every
later call on that loop (across runs, since the daemon keeps one caller per model
spec), remade when the key in the environment changes, and closed by
:meth:`ClientPool.aclose` or, failing that, when its loop shuts down.

Why per loop: an async HTTP client's connections belong to the loop that opened them. A
sync run drives its calls on a loop of its own, which ends with the run.

How a client is closed with its loop: each one is held open by a suspended async
generator. ``asyncio.run`` and ``asyncio.Runner`` close every such generator of their
loop before closing it (``loop.shutdown_asyncgens``), which runs the generator's
``finally``: the client's ``aclose``. So no connection outlives its loop unclosed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import attrs

MakeClient = Callable[[str], Any]
CloseClient = Callable[[Any], Awaitable[None]]


@attrs.define(slots=True)
class _Entry:
    key: str
    client: Any
    keeper: AsyncGenerator[None, None]


class ClientPool:
    """One client per event loop, made by ``make(key)`` and closed by ``close(client)``."""

    def __init__(self, make: MakeClient, close: CloseClient) -> None:
        self._make = make
        self._close = close
        self._entries: dict[asyncio.AbstractEventLoop, _Entry] = {}
        self._lock = threading.Lock()  # sync runs call from threads of their own

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> Any:
        """The running loop's client for ``key``; a changed key replaces the client."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for other in [lp for lp in self._entries if lp.is_closed()]:
                del self._entries[other]  # its loop closed the client on shutdown
            entry = self._entries.get(loop)
            if entry is not None and entry.key == key:
                return entry.client
            client = self._make(key)
            keeper = _hold_open(client, self._close)
            self._entries[loop] = _Entry(key, client, keeper)
        await keeper.__anext__()  # registers the generator with the loop
        if entry is not None:
            await entry.keeper.aclose()
        return client

    async def aclose(self) -> None:
        """Close every client: this loop's now, a running loop's on that loop."""
        with self._lock:
            entries, self._entries = self._entries, {}
        current = asyncio.get_running_loop()
        for loop, entry in entries.items():
            if loop is current:
                await entry.keeper.aclose()
            elif loop.is_running():
                with contextlib.suppress(RuntimeError):  # it closed meanwhile
                    asyncio.run_coroutine_threadsafe(entry.keeper.aclose(), loop)


async def _hold_open(client: Any, close: CloseClient) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await close(client)
