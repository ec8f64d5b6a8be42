"""What a process serving runs sets up once, whatever its face (the LSP daemon, the ACP
agent, ``cleveragents run``), and what every face shows when a run asks the user."""

from __future__ import annotations

import gc
from typing import Any

import attrs

from ..tool import PermissionQuery
from ._collector import POLICY as COLLECTOR


def prepare_process() -> None:
    """Once, after the long-lived objects are built: keep the process's ``/proc`` entries
    (its environment, its keys) unreadable to the tools' commands, freeze what exists for
    the collector, and install the collector policy that keeps long runs from stalling."""
    from ..workspace.shell import protect_process

    protect_process()
    gc.freeze()  # the long-lived start-up objects need never be scanned again
    gc.enable()
    COLLECTOR.install()  # and a long run's objects are frozen as they age


@attrs.frozen
class PermissionPrompt:
    """A call the profile asks about, as a face shows it: the inputs the tool will
    really receive (the context's reserved values included), and the reason, saying
    when the model's own values for those were replaced."""

    call_id: str
    tool_name: str
    inputs: dict[str, Any]
    reason: str

    @classmethod
    def of(cls, query: PermissionQuery, reason: str) -> PermissionPrompt:
        overridden = query.overridden
        if overridden:
            reason += (
                f"; the model's own {' and '.join(overridden)} "
                f"{'was' if len(overridden) == 1 else 'were'} replaced by the run's"
            )
        inputs = query.inputs if query.inputs is not None else query.arguments
        return cls(query.call_id, query.spec.name, dict(inputs), reason)
