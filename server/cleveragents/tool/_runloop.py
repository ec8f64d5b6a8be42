"""The event loop a sync run makes for its awaitables, and the worker pool of sync runs.

``run_tool_loop`` runs in the caller's thread. When a run meets an awaitable (an async
handler, model, hook or policy) it makes one private event loop, at that moment, and
keeps it to the run's end: an async call costs no thread hop and no loop of its own.
When the caller's thread already runs an event loop, the private loop runs in a worker
thread instead, the caller waiting on it as on any sync call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

_shared_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def worker_pool() -> concurrent.futures.ThreadPoolExecutor:
    """One process-wide pool for blocking handlers of sync runs, created on first use."""
    global _shared_pool
    with _pool_lock:
        if _shared_pool is None:
            _shared_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=32, thread_name_prefix="cleveragents-tool"
            )
        return _shared_pool


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class RunLoop:
    """One sync run's private event loop: made at the first awaitable, closed with the
    run, cancelling whatever is still running on it."""

    __slots__ = ("_loop",)

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` to its end on the run's loop and return its result."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.new_event_loop()
        if _in_running_loop():
            return worker_pool().submit(loop.run_until_complete, _await(awaitable)).result()
        return loop.run_until_complete(_await(awaitable))

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            self._finish(loop)
        finally:
            loop.close()

    @staticmethod
    def _finish(loop: asyncio.AbstractEventLoop) -> None:
        def finish() -> None:
            loop.run_until_complete(_cancel_all())
            loop.run_until_complete(loop.shutdown_asyncgens())

        if _in_running_loop():
            worker_pool().submit(finish).result()
        else:
            finish()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def _cancel_all() -> None:
    """Cancel the loop's other tasks (a call the run gave up on) and wait for them."""
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
