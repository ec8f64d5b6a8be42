"""Stoppable workers: how ``file-list`` and ``file-search`` run off the event loop and stop.

A list or search runs in a thread of its own (:func:`run_stoppable`) and looks at a
:class:`StopFlag` at every directory entry and between chunks of lines; a timeout
(:data:`WALK_TIMEOUT_S`) or a cancel sets the flag, and the worker ends at its next
look (``docs/security.md`` §2.1). This module knows nothing of what the worker does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Awaitable, Callable

from cleveragents.tool import JSONValue

from ._errors import WorkspaceToolError
from ._limits import WorkspaceLimits

WALK_TIMEOUT_S = 60.0
"""The time limit of ``file-list`` and ``file-search``; their workers stop at it too."""


class _Stopped(WorkspaceToolError):
    """The worker was asked to stop; nobody reads this result (the call was cancelled)."""


class StopFlag:
    """Tells a list or search worker to stop: set on cancel, or when ``deadline`` passes.

    The worker calls :meth:`check` at every directory entry the walk meets (ignored ones
    included, and every 1024 entries of one directory read) and between chunks of lines. One
    RE2 match of one line is never interrupted; a line is at most
    ``max_search_file_bytes`` long, so that is bounded too.
    """

    __slots__ = ("deadline", "event", "timeout_s")

    def __init__(self, timeout_s: float | None = None) -> None:
        self.event = threading.Event()
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s if timeout_s is not None else math.inf

    def check(self) -> None:
        if self.event.is_set():
            raise _Stopped("stopped: the call was cancelled")
        if time.monotonic() >= self.deadline:
            raise WorkspaceToolError(
                f"stopped after {self.timeout_s:g} s, the tool's time limit; "
                "narrow the pattern, glob or path"
            )


NEVER = StopFlag()  # for direct calls without a flag: never set, no deadline

Work = Callable[[dict[str, JSONValue], WorkspaceLimits, StopFlag], dict[str, JSONValue]]


async def run_stoppable(
    name: str, work: Work, inputs: dict[str, JSONValue], limits: WorkspaceLimits, timeout_s: float
) -> dict[str, JSONValue]:
    """Run ``work`` in a thread of its own and await it without holding the event loop.

    A cancel (the runner's timeout, ``run/cancel``) sets the worker's :class:`StopFlag`
    and is re-raised at once; the worker ends at its next check. A thread of its own
    rather than the loop's shared pool: a worker finishing its last line after a cancel
    must not hold a pool slot that other tools wait for. The thread is named
    ``cleveragents-<name>``.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[dict[str, JSONValue]] = loop.create_future()
    stop = StopFlag(timeout_s)
    context = contextvars.copy_context()

    def settle(result: dict[str, JSONValue] | None, error: BaseException | None) -> None:
        if future.done():
            return  # cancelled meanwhile: the result is dropped
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result or {})

    def target() -> None:
        try:
            result = context.run(work, inputs, limits, stop)
        except Exception as exc:  # noqa: BLE001 - the thread's boundary: handed to the awaiting task
            outcome: tuple[dict[str, JSONValue] | None, BaseException | None] = (None, exc)
        else:
            outcome = (result, None)
        with contextlib.suppress(RuntimeError):  # the loop is already closed: nobody waits
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=target, name=f"cleveragents-{name}", daemon=True).start()
    try:
        return await future
    except asyncio.CancelledError:
        stop.event.set()
        raise


Handler = Callable[[dict[str, JSONValue]], Awaitable[dict[str, JSONValue]]]


def stoppable(name: str, work: Work, limits: WorkspaceLimits) -> Handler:
    """An async tool handler that runs ``work`` under :func:`run_stoppable`."""

    async def handler(inputs: dict[str, JSONValue]) -> dict[str, JSONValue]:
        return await run_stoppable(name, work, inputs, limits, WALK_TIMEOUT_S)

    return handler
