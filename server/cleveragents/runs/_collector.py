"""The cyclic garbage collector, kept from stalling the event loop on long runs.

A run of 100,000 records holds some 400,000 tracked objects (records, tool calls,
messages). CPython's full collection scans every tracked object, and it comes whenever
the old generation has grown by a quarter: on such a heap each one held the loop for 60
to 100 ms, during the run and as it ended (``scripts/bench/run_end_stall.py``).

The policy: right after each full collection, the survivors are frozen (``gc.freeze()``),
so the next full collection scans only what is newer. Freezing is safe for them: they
were just found alive, and a frozen object that is dropped later is still freed by its
reference count; only one that becomes part of a reference cycle waits. Those are
released when the daemon is idle: once no run is active, everything is unfrozen, and the
next full collection, over a heap the finished runs no longer fill, collects them. A
daemon that is never idle (runs overlapping for hours) unfreezes every
``MAX_FREEZES`` full collections instead, so such garbage stays bounded; that one scan
is a full one.
"""

from __future__ import annotations

import gc
from typing import Any

MAX_FREEZES = 64
"""Full collections whose survivors are frozen before everything is unfrozen again."""


class CollectorPolicy:
    """Installed once per process by ``serve`` (and by benchmarks that measure it)."""

    def __init__(self) -> None:
        self.installed = False
        self.freezes = 0
        self._since_unfreeze = 0

    def install(self) -> None:
        if not self.installed:
            gc.callbacks.append(self._after_collection)
            self.installed = True

    def uninstall(self) -> None:
        if self.installed:
            gc.callbacks.remove(self._after_collection)
            self.installed = False
            gc.unfreeze()

    def _after_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            if self._since_unfreeze >= MAX_FREEZES:
                self.idle()
                return
            gc.freeze()
            self.freezes += 1
            self._since_unfreeze += 1

    def idle(self) -> None:
        """No run is active: let the collector see every object again."""
        if self.installed:
            gc.unfreeze()
            self._since_unfreeze = 0


POLICY = CollectorPolicy()
