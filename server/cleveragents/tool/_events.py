"""The event-sink protocol through which a run reports progress, and its no-op default.

The loop never touches a transport: the daemon implements this sink with notifications,
a CLI with printing, a library user with whatever they like. Methods are called on the
driver's thread (the event loop for ``arun_tool_loop``) and must not block.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from ._types import ToolCall, ToolCallRecord, ToolCallRunResult, Usage


@attrs.define(slots=True)
class IterationSummary:
    """One finished iteration: its LLM call and the tool calls it asked for."""

    iteration: int
    content: str
    tool_call_count: int
    duration_ms: float
    usage: Usage | None = None


class EventSink(Protocol):
    def on_iteration_started(self, iteration: int) -> None: ...

    def on_message_delta(self, iteration: int, text: str) -> None: ...

    def on_tool_call_started(self, iteration: int, call: ToolCall) -> None: ...

    def on_tool_call(self, record: ToolCallRecord) -> None: ...

    def on_iteration(self, summary: IterationSummary) -> None: ...

    def on_finished(self, result: ToolCallRunResult) -> None: ...


class NullEventSink:
    """The library default: ignores every event."""

    def on_iteration_started(self, iteration: int) -> None:
        pass

    def on_message_delta(self, iteration: int, text: str) -> None:
        pass

    def on_tool_call_started(self, iteration: int, call: ToolCall) -> None:
        pass

    def on_tool_call(self, record: ToolCallRecord) -> None:
        pass

    def on_iteration(self, summary: IterationSummary) -> None:
        pass

    def on_finished(self, result: ToolCallRunResult) -> None:
        pass
