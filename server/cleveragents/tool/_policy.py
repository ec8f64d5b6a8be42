"""The permission seam: how the runner asks whether a call may run.

The core knows nothing of profiles or editors. ``workspace.profiles`` implements
automation profiles on top of this; the daemon adds ``permission/request``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Literal, Protocol, get_args

import attrs

from ._types import RESERVED_INPUT_KEYS, JSONValue, ToolActorContext

if TYPE_CHECKING:
    from ._spec import ToolSpec

Decision = Literal["allow", "ask", "deny"]
"""What a permission rule says about a kind of call: run it, ask a human, or refuse it."""

PermissionOutcome = Literal["allow_once", "allow_always", "reject_once", "reject_always"]
"""A human's answer to a permission prompt (``permission/request`` on the wire)."""

PERMISSION_OUTCOMES: tuple[PermissionOutcome, ...] = get_args(PermissionOutcome)


@attrs.define(slots=True, frozen=True)
class PermissionQuery:
    """One call awaiting a decision.

    ``arguments`` is what the model sent; ``inputs`` what the tool will really receive
    (the arguments with the context's reserved values, which always win). A prompt shows
    ``inputs``, so a model cannot dress a call up with reserved values of its own."""

    spec: ToolSpec
    arguments: dict[str, JSONValue]
    call_id: str
    iteration: int
    context: ToolActorContext
    inputs: dict[str, JSONValue] | None = None

    @property
    def overridden(self) -> list[str]:
        """The reserved keys the model sent values for, which the context replaced."""
        inputs = self.inputs or {}
        return sorted(
            key
            for key in RESERVED_INPUT_KEYS
            if key in self.arguments and self.arguments[key] != inputs.get(key)
        )


class ToolPolicy(Protocol):
    """Returns ``None`` to allow the call, or the refusal text to record as its error.

    May be sync or async; an async policy may ask a human and wait.
    """

    def authorize(self, query: PermissionQuery, /) -> str | Awaitable[str | None] | None: ...


class AllowAll:
    """The library default: every call is allowed."""

    def authorize(self, query: PermissionQuery, /) -> str | None:
        return None
