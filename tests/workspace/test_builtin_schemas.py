"""The built-in tools compile their validators at their first call, not when built (it
kept ~14 ms out of the daemon's start-up): their schemas must compile, their first call
must still be checked, and nobody else's schema may wait."""

from __future__ import annotations

import pytest

from cleveragents.tool import SchemaDefinitionError, ToolInputError, ToolOutputError, ToolSpec
from cleveragents.tool._spec import compile_schema
from cleveragents.workspace import builtin_tools


def test_every_builtin_tool_schema_compiles() -> None:
    specs = builtin_tools()
    assert len(specs) == 6
    for spec in specs:
        assert spec.validators_on_first_use, spec.name
        compile_schema(spec.schema.parameters)  # raises SchemaDefinitionError if broken
        assert spec.output_schema is not None, spec.name
        compile_schema(spec.output_schema)


def test_a_builtin_tool_checks_its_first_call_arguments_and_output() -> None:
    tools = {spec.name: spec for spec in builtin_tools()}
    read = tools["builtin/file-read"]
    with pytest.raises(ToolInputError, match=r"arguments\.path"):
        read.validate_input({"path": 3})
    read.validate_input({"path": "a.txt"})
    shell = tools["builtin/shell"]
    with pytest.raises(ToolInputError, match="command"):
        shell.validate_input({})
    with pytest.raises(ToolOutputError):
        shell.validate_output({"exit_code": "zero"})


def test_another_tools_bad_schema_is_still_refused_when_built() -> None:
    with pytest.raises(SchemaDefinitionError, match="input_schema"):
        ToolSpec(
            name="mine/bad",
            description="d",
            input_schema={"type": "object", "properties": {"x": {"type": "nonsense"}}},
            handler=lambda inputs: None,
        )


def test_a_builtin_tools_released_validator_leaves_the_shared_cache() -> None:
    from cleveragents.tool import _spec

    spec = builtin_tools()[0]
    spec.validate_input({"path": "x"})
    validator = spec._validate_input
    assert isinstance(validator, _spec._OnFirstUse)
    compiled = validator.compiled
    assert compiled is not None
    assert _spec._validators.get(compiled.key) is compiled
    spec.release_validators()
    assert _spec._validators.get(compiled.key) is None
