"""A bounded wait for what another process does (a file it writes, its death), which
offers no event to await."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

WAIT_S = 15.0
"""Bound on a wait for another process (it normally takes well under 1 s)."""


async def wait_for(
    predicate: Callable[[], bool], timeout: float = WAIT_S, interval: float = 0.01
) -> None:
    """Wait until ``predicate()`` holds; ``TimeoutError`` after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110 - another process's doing: nothing to await
            await asyncio.sleep(interval)
