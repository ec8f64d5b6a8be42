"""The runtime uses the router it is given: it builds the provider's tool schemas once
per run (``LLMRequest.provider_tools``, rebuilt only when the registry changes) and
decodes the tool names the model answers with."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from toolkit import spec

from cleveragents.tool import (
    LLMRequest,
    LLMResponse,
    ToolCall,
    ToolCallingRuntime,
    ToolCallRouter,
    ToolRegistry,
    ToolRunner,
    ToolSchema,
)

MODES = ["sync", "async"]


def run(rt: ToolCallingRuntime, mode: str) -> Any:
    if mode == "sync":
        return rt.run_tool_loop("go")
    return asyncio.run(rt.arun_tool_loop("go"))


class CountingRouter:
    """Encodes ``a/b`` as ``a__b``; counts the schema builds."""

    def __init__(self) -> None:
        self.builds = 0

    def tools(self, schemas: Sequence[ToolSchema]) -> list[dict[str, Any]]:
        self.builds += 1
        return [{"name": s.name.replace("/", "__")} for s in schemas]

    def decode_name(self, encoded: str) -> str:
        return encoded.replace("__", "/")

    def encode_name(self, name: str) -> str:
        return name.replace("/", "__")


@pytest.mark.parametrize("mode", MODES)
def test_provider_tools_are_built_once_per_run_and_names_decoded(mode: str) -> None:
    registry = ToolRegistry()
    registry.register(spec("t/echo", lambda inputs: "echoed"))
    seen: list[Any] = []

    def model(request: LLMRequest) -> LLMResponse:
        seen.append(request.provider_tools)
        if request.iteration <= 3:
            return LLMResponse("", [ToolCall("", "t__echo", {})])
        return LLMResponse("done")

    router = CountingRouter()
    rt = ToolCallingRuntime(registry, ToolRunner(registry), model, router=router)
    result = run(rt, mode)
    assert [r.tool_name for r in result.tool_call_history] == ["t/echo"] * 3
    assert all(r.success for r in result.tool_call_history)
    assert seen[0] == [{"name": "t__echo"}]
    assert all(tools is seen[0] for tools in seen)  # one build, reused every iteration
    assert router.builds == 1


def test_provider_tools_are_rebuilt_when_the_registry_changes_mid_run() -> None:
    registry = ToolRegistry()
    registry.register(spec("t/one", lambda inputs: 1))
    seen: list[Any] = []

    def model(request: LLMRequest) -> LLMResponse:
        seen.append(request.provider_tools)
        if request.iteration == 1:
            registry.register(spec("t/two", lambda inputs: 2))
            return LLMResponse("", [ToolCall("", "t__one", {})])
        return LLMResponse("done")

    rt = ToolCallingRuntime(registry, ToolRunner(registry), model, router=CountingRouter())
    rt.run_tool_loop("go")
    assert seen == [[{"name": "t__one"}], [{"name": "t__one"}, {"name": "t__two"}]]


def test_without_a_router_there_are_no_provider_tools() -> None:
    registry = ToolRegistry()
    seen: list[Any] = []

    def model(request: LLMRequest) -> LLMResponse:
        seen.append(request.provider_tools)
        return LLMResponse("done")

    ToolCallingRuntime(registry, ToolRunner(registry), model).run_tool_loop("go")
    assert seen == [None]


def test_the_real_router_builds_the_same_tools_as_called_directly() -> None:
    registry = ToolRegistry()
    registry.register(spec("plan/read", lambda inputs: "plan"))
    router = ToolCallRouter("openai")
    seen: list[LLMRequest] = []

    def model(request: LLMRequest) -> LLMResponse:
        seen.append(request)
        if request.iteration == 1:
            return LLMResponse("", [ToolCall("c", router.encode_name("plan/read"), {})])
        return LLMResponse("done")

    result = ToolCallingRuntime(registry, ToolRunner(registry), model, router=router).run_tool_loop(
        "go"
    )
    assert seen[0].provider_tools == router.tools(seen[0].tools)
    assert [(r.tool_name, r.output) for r in result.tool_call_history] == [("plan/read", "plan")]


def test_a_router_without_the_methods_used_is_refused() -> None:
    registry = ToolRegistry()

    class NamesOnly:
        def decode_name(self, encoded: str) -> str:
            return encoded

    with pytest.raises(TypeError):
        ToolCallingRuntime(
            registry,
            ToolRunner(registry),
            lambda request: LLMResponse(),
            router=NamesOnly(),  # type: ignore[arg-type]
        )
