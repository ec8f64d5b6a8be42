"""Builders shared by the core tests."""

from __future__ import annotations

from typing import Any

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import ToolCallingRuntime, ToolHandler, ToolRegistry, ToolRunner, ToolSpec

OBJECT: dict[str, Any] = {"type": "object"}


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
