"""Shared test helpers: the scripted model and a recording event sink."""

from __future__ import annotations

from typing import Any

import pytest

from cleveragents.tool import (
    IterationSummary,
    ToolCall,
    ToolCallRecord,
    ToolCallRunResult,
)


class RecordingSink:
    """Collects every event as (kind, payload) in the order the loop emitted them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_iteration_started(self, iteration: int) -> None:
        self.events.append(("iteration_started", iteration))

    def on_message_delta(self, iteration: int, text: str) -> None:
        self.events.append(("delta", (iteration, text)))

    def on_tool_call_started(self, iteration: int, call: ToolCall) -> None:
        self.events.append(("tool_started", (iteration, call.name)))

    def on_tool_call(self, record: ToolCallRecord) -> None:
        self.events.append(("tool_call", record))

    def on_iteration(self, summary: IterationSummary) -> None:
        self.events.append(("iteration", summary))

    def on_finished(self, result: ToolCallRunResult) -> None:
        self.events.append(("finished", result))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()
