"""The live view in process: what it prints for a run, with hostile model text, and the
summary of a run stopped by the limit."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest

from cleveragents.client._live import LiveView
from cleveragents.client._views import Output

CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HOSTILE = "\x1b]0;title\x07\x1b[2J\x9b1;1H\r"


def events(content: str) -> list[tuple[str, dict[str, Any]]]:
    record = {"toolName": f"builtin/x{HOSTILE}", "inputs": {"a": HOSTILE}, "output": None,
              "durationMs": 12.5, "success": False, "error": f"boom{HOSTILE}", "iteration": 1,
              "callId": "c1"}  # fmt: skip
    return [
        ("run/started", {"runId": "r", "seq": 1, "sandboxRoot": "/w", "maxIterations": 2, "tools": []}),
        ("run/messageDelta", {"runId": "r", "seq": 2, "iteration": 1, "text": content}),
        ("run/toolCallStarted", {"runId": "r", "seq": 3, "iteration": 1, "callId": "c1",
                                 "toolName": record["toolName"], "inputs": record["inputs"]}),
        ("run/toolCall", {"runId": "r", "seq": 4, "record": record}),
        ("run/iteration", {"runId": "r", "seq": 5, "iteration": 1, "content": content,
                           "toolCallCount": 1, "durationMs": 20.0}),
    ]  # fmt: skip


def test_the_live_view_prints_iterations_and_rows_without_escape_sequences(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one summary line, not wrapped at 80
    stream = io.StringIO()
    view = LiveView(Output(stream))
    view.start()
    for method, params in events(f"Thinking{HOSTILE} hard."):
        view.event(method, params)
    view.finish(
        {"runId": "r", "status": "limit", "content": "x", "toolCallHistory": [events("")[3][1]["record"]],
         "iterations": 2, "terminatedByLimit": True, "durationMs": 1500.0,
         "usage": {"inputTokens": 1200, "outputTokens": 34}}, None,
    )  # fmt: skip
    shown = stream.getvalue()
    assert not CONTROLS.findall(shown)
    assert "Thinking hard." in shown
    assert re.search(r"failed +builtin/x +12 ms +boom", shown)
    assert (
        "■ stopped at the iteration limit · 2 iterations · 1 tool call (1 failed) · 1.5 s · 1,200 tokens in / 34 out"
        in shown
    )
    assert "not an answer" in shown
    assert "run r" in shown
