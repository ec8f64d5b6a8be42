"""The one field marker every wire module uses (``OPTIONAL`` fields are omitted when
``None``), and the decorator that enters a wire class in the table of run events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

C = TypeVar("C", bound=type)

OPTIONAL = {"optional": True}
"""Field metadata: omitted from the wire when ``None``; not required on input."""


def opt() -> Any:
    """An ``OPTIONAL`` field, ``None`` by default."""
    return attrs.field(default=None, metadata=OPTIONAL)


@attrs.frozen
class RunNotification:
    """A run event on the wire: its method, its wire class, the core event class it
    carries, and a line for the method table."""

    method: str
    wire: type
    event: type
    summary: str


RUN_NOTIFICATIONS: list[RunNotification] = []
"""Every run notification, in the order its wire class was defined: the method table
(``_methods.py``) lists them from here, so a new run event is its core class plus its
decorated wire class."""


def run_notification(method: str, event: type, summary: str) -> Callable[[C], C]:
    """Enter the decorated wire class as the notification ``method`` of ``event``; its
    fields are ``run_id``, ``seq`` and the event's own, by the same names."""

    def enter(cls: C) -> C:
        fields = {f.name for f in attrs.fields(cls)} - {"run_id", "seq"}
        own = {f.name for f in attrs.fields(event)} - {"run_id", "seq"}
        if fields != own:
            raise TypeError(f"{cls.__name__} must carry exactly the fields of {event.__name__}")
        if any(n.method == method or n.event is event for n in RUN_NOTIFICATIONS):
            raise TypeError(f"run notification {method!r} or its event is entered twice")
        RUN_NOTIFICATIONS.append(RunNotification(method, cls, event, summary))
        return cls

    return enter
