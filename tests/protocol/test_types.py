"""The wire namespace: every wire class in one place, and the core's concepts reused."""

from __future__ import annotations

import importlib
import pkgutil

import attrs
import pytest

import cleveragents.tool as core
from cleveragents.protocol import BY_NAME, Method, wire


def test_every_wire_class_of_every_module_is_in_the_namespace() -> None:
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(wire.__path__):
        module = importlib.import_module(f"{wire.__name__}.{info.name}")
        found |= {
            name: value
            for name, value in vars(module).items()
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__
        }
    assert len(found) > 40
    assert set(found) <= set(wire.__all__)
    assert all(hasattr(wire, name) for name in wire.__all__)
    # the namespace builds each module at its first use: what it hands out is that module's
    assert all(getattr(wire, name) is cls for name, cls in found.items())


def test_the_method_table_names_its_types_and_hands_out_the_wire_classes() -> None:
    assert BY_NAME["run/start"].params is wire.RunParams
    assert BY_NAME["run/start"].result is wire.RunResult
    assert BY_NAME["tools/changed"].result is None
    with pytest.raises(ValueError, match="NoSuchParams"):  # a misspelt name fails at import
        Method("x/y", "request", "client->daemon", "NoSuchParams", None, "A method.")


def test_the_core_concepts_on_the_wire_are_the_cores_own() -> None:
    assert wire.Decision is core.Decision
    assert wire.PermissionOutcome is core.PermissionOutcome
    assert wire.ToolCallRecord is core.ToolCallRecord
