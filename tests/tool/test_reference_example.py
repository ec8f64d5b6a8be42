"""The usage example of reference/actor_runtime.md, run as written."""

from __future__ import annotations

from typing import Any

import pytest

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import ToolSpec


def test_the_reference_usage_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    my_llm_caller = ScriptedModel(
        [
            {"toolCalls": [{"name": "plan/read", "arguments": {"section": "goal"}}]},
            {"content": "Feature implemented."},
        ]
    )

    def read_plan(inputs: dict[str, Any]) -> Any:
        return {"section": inputs["section"], "sandbox": inputs["sandbox_root"]}

    # --- from the reference, verbatim (the "register tools..." comment filled in) ---
    from cleveragents.tool import (
        ToolActorContext,
        ToolCallingRuntime,
        ToolRegistry,
        ToolRunner,
    )

    registry = ToolRegistry()
    runner = ToolRunner(registry)
    # register tools...
    registry.register(ToolSpec("plan/read", "Read a plan section.", {"type": "object"}, read_plan))

    runtime = ToolCallingRuntime(
        registry=registry,
        runner=runner,
        llm_caller=my_llm_caller,
        max_iterations=10,
    )

    context = ToolActorContext(
        plan_id="plan-123",
        phase="execute",
        sandbox_root="/tmp/sandbox",
    )

    result = runtime.run_tool_loop(
        prompt="Implement the feature described in the plan.",
        context=context,
    )

    print(result.content)
    print(f"Tool calls: {len(result.tool_call_history)}")
    print(f"Iterations: {result.iterations}")
    # --- end of the reference example ---

    assert capsys.readouterr().out == "Feature implemented.\nTool calls: 1\nIterations: 2\n"
    record = result.tool_call_history[0]
    assert record.output == {"section": "goal", "sandbox": "/tmp/sandbox"}
    assert context.tool_call_history == result.tool_call_history


def test_records_and_context_have_the_reference_field_names() -> None:
    import attrs

    from cleveragents.tool import ToolActorContext, ToolCallRecord

    record_fields = [f.name for f in attrs.fields(ToolCallRecord)]
    assert record_fields[:7] == [
        "tool_name", "inputs", "output", "duration_ms", "success", "error", "iteration",
    ]  # fmt: skip
    context_fields = {f.name for f in attrs.fields(ToolActorContext)}
    assert context_fields >= {
        "plan_id", "phase", "sandbox_root", "automation_profile", "resource_bindings",
        "project_resources", "tool_call_history",
    }  # fmt: skip
