"""A caller maps a run's tool set to its provider's format once, not on every call."""

from __future__ import annotations

from typing import Any

import pytest

from cleveragents.llm.spec import ModelSpec, create_caller
from cleveragents.tool import CancelToken, LLMRequest, ToolActorContext, ToolSchema

from .kits import sdk_providers

SCHEMAS = (
    ToolSchema("files/read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
)  # fmt: skip


class _CountingRouter:
    """The caller's router, counting the calls that map a tool set."""

    def __init__(self, router: Any, calls: list[Any]) -> None:
        self._router = router
        self._calls = calls

    def tools(self, schemas: Any) -> Any:
        self._calls.append(schemas)
        return self._router.tools(schemas)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._router, name)


def _request(tools: tuple[ToolSchema, ...]) -> LLMRequest:
    return LLMRequest([], tools, 1, ToolActorContext(), CancelToken(), lambda _text: None)


@pytest.mark.parametrize("source", sdk_providers())
def test_the_same_tool_set_is_mapped_once(source: str) -> None:
    caller: Any = create_caller(ModelSpec(source, model="m", base_url="http://127.0.0.1:9"))
    calls: list[Any] = []
    caller._router = _CountingRouter(caller._router, calls)
    first = caller.body(_request(SCHEMAS))
    again = caller.body(_request(SCHEMAS))
    assert len(calls) == 1
    assert first == again
    assert "files" in str(first)
    changed = (*SCHEMAS, ToolSchema("files/list", "List.", {"type": "object"}))
    assert "list" in str(caller.body(_request(changed)))
    assert len(calls) == 2
