"""Builders shared by the core tests."""

from __future__ import annotations

import threading
from typing import Any

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import (
    CancelToken,
    EventSink,
    IterationFinished,
    IterationStarted,
    Message,
    MessageDelta,
    RunEvent,
    ToolCall,
    ToolCallFinished,
    ToolCallingRuntime,
    ToolCallRecord,
    ToolCallStarted,
    ToolHandler,
    ToolRegistry,
    ToolRunner,
    ToolSchema,
    ToolSpec,
)

OBJECT: dict[str, Any] = {"type": "object"}

# The codec tests' shared tools and conversation (one namespaced name, one MCP name;
# a call that succeeded and one that failed).
SCHEMAS = [
    ToolSchema(
        "builtin/file-read",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSchema("server:local/tool", "A server tool.", {"type": "object"}),
]

HISTORY = [
    Message("system", "Be brief."),
    Message("user", "Read a.txt"),
    Message(
        "assistant",
        "Reading.",
        tool_calls=[
            ToolCall("c1", "builtin/file-read", {"path": "a.txt"}),
            ToolCall("c2", "server:local/tool", {}),
        ],
    ),
    Message("tool", "hello", tool_call_id="c1", name="builtin/file-read"),
    Message("tool", "boom", tool_call_id="c2", name="server:local/tool", is_error=True),
    Message("assistant", "It says hello."),
]


def spec(
    name: str, handler: ToolHandler, schema: dict[str, Any] | None = None, **kw: Any
) -> ToolSpec:
    return ToolSpec(name, f"The {name} tool.", schema or OBJECT, handler, **kw)


def runtime(
    turns: list[dict[str, Any]], *specs: ToolSpec, max_iterations: int = 25, **runner_kw: Any
) -> ToolCallingRuntime:
    registry = ToolRegistry()
    for s in specs:
        registry.register(s)
    return ToolCallingRuntime(
        registry=registry,
        runner=ToolRunner(registry, **runner_kw),
        llm_caller=ScriptedModel(turns),
        max_iterations=max_iterations,
    )


def calls(*names_and_args: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"toolCalls": [{"name": n, "arguments": a} for n, a in names_and_args]}


class RecordingSink(EventSink):
    """Collects every event as (kind, payload) in the order the loop emitted them; a
    subclass may override one kind's method (``on_tool_call`` ...) to act on it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_event(self, event: RunEvent, /) -> None:
        if isinstance(event, IterationStarted):
            self.on_iteration_started(event.iteration)
        elif isinstance(event, MessageDelta):
            self.on_message_delta(event.iteration, event.text)
        elif isinstance(event, ToolCallStarted):
            self.on_tool_call_started(event.iteration, event.tool_name)
        elif isinstance(event, ToolCallFinished):
            self.on_tool_call(event.record)
        elif isinstance(event, IterationFinished):
            self.on_iteration(event)

    def on_iteration_started(self, iteration: int) -> None:
        self.events.append(("iteration_started", iteration))

    def on_message_delta(self, iteration: int, text: str) -> None:
        self.events.append(("delta", (iteration, text)))

    def on_tool_call_started(self, iteration: int, name: str) -> None:
        self.events.append(("tool_started", (iteration, name)))

    def on_tool_call(self, record: ToolCallRecord) -> None:
        self.events.append(("tool_call", record))

    def on_iteration(self, summary: IterationFinished) -> None:
        self.events.append(("iteration", summary))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


def cancel_once_started(started: threading.Event, token: CancelToken) -> threading.Thread:
    """A started thread that cancels ``token`` as soon as ``started`` is set (a handler
    sets it): the cancel lands while the call is running. Join it when done."""

    def cancel() -> None:
        started.wait(5)
        token.cancel()

    canceller = threading.Thread(target=cancel)
    canceller.start()
    return canceller
