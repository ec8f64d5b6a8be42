"""ToolRegistry and ToolSpec: names, duplicates, layering, the schema cache."""

from __future__ import annotations

import pytest
from toolkit import spec

from cleveragents.tool import (
    DuplicateToolError,
    InvalidToolNameError,
    ToolNotFoundError,
    ToolRegistry,
    ToolSpec,
)


def test_registering_a_duplicate_name_fails_and_names_the_tool() -> None:
    registry = ToolRegistry()
    registry.register(spec("builtin/file-read", lambda i: None))
    with pytest.raises(DuplicateToolError, match="builtin/file-read"):
        registry.register(spec("builtin/file-read", lambda i: None))


def test_replace_swaps_an_existing_tool() -> None:
    registry = ToolRegistry()
    registry.register(spec("t", lambda i: 1))
    new = spec("t", lambda i: 2)
    registry.register(new, replace=True)
    assert registry.lookup("t") is new


def test_unknown_names_fail_loudly_with_the_name() -> None:
    registry = ToolRegistry()
    with pytest.raises(ToolNotFoundError, match="'ghost'"):
        registry.lookup("ghost")
    with pytest.raises(ToolNotFoundError, match="'ghost'"):
        registry.unregister("ghost")


@pytest.mark.parametrize("name", ["", "has space", "x" * 129, "semi;colon", "ünï"])
def test_invalid_tool_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidToolNameError, match="invalid tool name"):
        spec(name, lambda i: None)


@pytest.mark.parametrize("name", ["builtin/file-read", "server:local/tool", "a.b_c-d", "x" * 128])
def test_namespaced_names_are_valid(name: str) -> None:
    assert spec(name, lambda i: None).name == name


def test_a_bad_schema_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="invalid JSON Schema"):
        ToolSpec("t", "d", {"type": "no-such-type"}, lambda i: None)


def test_a_run_layer_sees_the_parent_its_own_tools_and_honours_the_allow_list() -> None:
    shared = ToolRegistry()
    shared.register(spec("a", lambda i: None))
    shared.register(spec("b", lambda i: None))
    run = ToolRegistry(parent=shared, allow={"a"})
    run.register(spec("mine", lambda i: None))  # the run's own: not subject to the allow-list
    assert run.names() == ["a", "mine"]
    assert run.get("mine") is not None
    assert "b" not in run
    assert shared.names() == ["a", "b"]


def test_schemas_are_rebuilt_only_when_the_registry_changes() -> None:
    shared = ToolRegistry()
    shared.register(spec("a", lambda i: None))
    run = ToolRegistry(parent=shared)
    first = run.schemas()
    assert run.schemas() is first
    shared.register(spec("b", lambda i: None))
    assert [s.name for s in run.schemas()] == ["a", "b"]
    run.unregister  # noqa: B018 - attribute exists
    with pytest.raises(ToolNotFoundError):
        run.unregister("a")  # owned by the parent, not this layer
