"""The wire namespace: every wire class in one place, and the core's concepts reused."""

from __future__ import annotations

import importlib
import pkgutil

import attrs

import cleveragents.tool as core
from cleveragents.protocol import wire


def test_every_wire_class_of_every_module_is_in_the_namespace() -> None:
    found = set()
    for info in pkgutil.iter_modules(wire.__path__):
        module = importlib.import_module(f"{wire.__name__}.{info.name}")
        found |= {
            name
            for name, value in vars(module).items()
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__
        }
    assert len(found) > 40
    assert found <= set(wire.__all__)
    assert all(hasattr(wire, name) for name in wire.__all__)


def test_the_core_concepts_on_the_wire_are_the_cores_own() -> None:
    assert wire.Decision is core.Decision
    assert wire.PermissionOutcome is core.PermissionOutcome
    assert wire.ToolCallRecord is core.ToolCallRecord
