"""The runtime speaks tool names as the registry knows them and takes no router:
translating tools and names to a provider's wire format is the model caller's, which
holds its own ``ToolCallRouter`` (as every adapter in ``cleveragents.llm`` does)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cleveragents.tool import (
    LLMRequest,
    LLMResponse,
    ToolCallingRuntime,
    ToolCallRouter,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
)

MODES = ["sync", "async"]


def returns(value: str) -> Any:
    return lambda inputs: value


def registry_of(*names: str) -> ToolRegistry:
    """A registry of tools that each answer their own name."""
    registry = ToolRegistry()
    for name in names:
        registry.register(ToolSpec(name, f"The {name} tool.", {"type": "object"}, returns(name)))
    return registry


class RoutedModel:
    """A caller that owns its router, as the adapters do: it offers the tools in the
    OpenAI format, and reads its "provider's" streamed answer (an encoded tool name)
    back through the router, so the runtime gets the registry's names."""

    blocking = False

    def __init__(self) -> None:
        self.router = ToolCallRouter("openai")
        self.offered: list[Any] = []
        self.requests: list[LLMRequest] = []

    def __call__(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        self.offered.append(self.router.tools(request.tools))
        stream = self.router.stream(iteration=request.iteration)
        if request.iteration == 1:
            name = self.router.encode_name("plan/read")
            call = {"index": 0, "id": "c1", "function": {"name": name, "arguments": "{}"}}
            stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
            stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        else:
            stream.feed({"choices": [{"index": 0, "delta": {"content": "done"},
                                      "finish_reason": "stop"}]})  # fmt: skip
        return stream.result()


@pytest.mark.parametrize("mode", MODES)
def test_a_caller_with_its_own_router_hands_the_runtime_the_registry_s_names(mode: str) -> None:
    model = RoutedModel()
    registry = registry_of("plan/read")
    runtime = ToolCallingRuntime(registry, ToolRunner(registry), model)
    if mode == "sync":
        result = runtime.run_tool_loop("go")
    else:
        result = asyncio.run(runtime.arun_tool_loop("go"))
    assert [(r.tool_name, r.output, r.success) for r in result.tool_call_history] == [
        ("plan/read", "plan/read", True)
    ]
    assert result.content == "done"
    assert [t.name for t in model.requests[0].tools] == ["plan/read"]  # not encoded
    assert model.offered[0] == [
        {"type": "function",
         "function": {"name": "plan__read", "description": "The plan/read tool.",
                      "parameters": {"type": "object"}}},
    ]  # fmt: skip
    assert not hasattr(model.requests[0], "provider_tools")  # the runtime builds none


def test_the_runtime_takes_no_router() -> None:
    registry = registry_of()
    with pytest.raises(TypeError, match="router"):
        ToolCallingRuntime(  # type: ignore[call-arg]
            registry, ToolRunner(registry), lambda r: LLMResponse(), router=ToolCallRouter("openai")
        )
    runtime = ToolCallingRuntime(registry, ToolRunner(registry), lambda r: LLMResponse(), 3)
    assert runtime.max_iterations == 3  # the fourth argument is the iteration limit
    assert not hasattr(runtime, "router")
