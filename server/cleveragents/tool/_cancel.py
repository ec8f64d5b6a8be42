"""A thread-safe cancel token shared by a run's caller, its drivers, and its adapters."""

from __future__ import annotations

import threading
from collections.abc import Callable


class CancelToken:
    """Set once; wakes every registered callback exactly once.

    Callbacks run in the thread that calls :meth:`cancel`; an async driver registers one
    that hops to its own loop with ``call_soon_threadsafe``. ``cancelled`` is a plain
    attribute (read it, never assign it): the loop reads it twice an iteration.
    """

    __slots__ = ("_callbacks", "_event", "_lock", "cancelled", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.cancelled = False
        self.reason: str | None = None

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self.cancelled:
                return
            self.reason = reason
            self.cancelled = True
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` on cancel (at once if already cancelled); returns a remover."""
        with self._lock:
            if not self.cancelled:
                self._callbacks.append(callback)
                return lambda: self._remove(callback)
        callback()
        return lambda: None

    def _remove(self, callback: Callable[[], None]) -> None:
        with self._lock, _suppress_value_error():
            self._callbacks.remove(callback)

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


class _suppress_value_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        return exc_type is ValueError
