"""One registry of error codes: every layer's classes, each code once, the base first."""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest

import cleveragents
from cleveragents._codegen import wire_errors
from cleveragents.tool import CleverAgentsError, JsonRpcCode, ToolError, error_classes


def test_every_layer_s_errors_are_registered_once_each() -> None:
    errors = wire_errors()
    names = {cls.__name__: cls.__module__.split(".")[1] for cls in errors}
    assert names["ToolNotFoundError"] == "tool"
    assert names["SandboxViolationError"] == "workspace"
    assert names["ProfileError"] == "workspace"
    assert names["ModelProviderError"] == "llm"
    assert names["RunNotFoundError"] == "transcripts"
    assert names["CapabilityError"] == "runs"
    assert names["NotInitializedError"] == "rpc"
    codes = [cls.code for cls in errors]
    assert codes == sorted(set(codes), reverse=True)  # unique, base (-32010) first
    assert errors[0] is CleverAgentsError


def test_a_code_taken_twice_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="-32011"):

        class Impostor(CleverAgentsError):
            code = ToolError.code

    assert ToolError in error_classes()


def test_a_subclass_without_a_code_of_its_own_is_not_a_new_entry() -> None:
    before = error_classes()

    class Detail(ToolError):
        pass

    assert error_classes() == before
    assert Detail("x").code == ToolError.code


def test_json_rpc_codes_are_plain_integers_on_the_wire() -> None:
    assert json.dumps({"code": JsonRpcCode.INVALID_PARAMS}) == '{"code": -32602}'
    assert {c.name: int(c) for c in JsonRpcCode} == {
        "PARSE_ERROR": -32700, "INVALID_REQUEST": -32600, "METHOD_NOT_FOUND": -32601,
        "INVALID_PARAMS": -32602, "INTERNAL_ERROR": -32603, "REQUEST_CANCELLED": -32800,
    }  # fmt: skip


def _import_every_module() -> None:
    """Every module of the package (but ``__main__``), so every error class is defined."""
    for module in pkgutil.walk_packages(cleveragents.__path__, "cleveragents."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def _all_error_classes() -> set[type[CleverAgentsError]]:
    """``error_classes()`` and every subclass without a code of its own (a
    ``WorkspaceToolError``, a ``ToolHandlerError``), from every layer."""
    found: set[type[CleverAgentsError]] = set(error_classes())
    pending = list(found)
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found and sub.__module__.startswith("cleveragents."):
                found.add(sub)
                pending.append(sub)
    return found


def test_no_error_class_is_also_a_built_in_error() -> None:
    # An ``except TimeoutError`` (or PermissionError, OSError, KeyError, ValueError, ...)
    # meant for the standard library's errors must never catch one of ours and relabel
    # it. The reference's error table names built-in errors only for what the runtime
    # raises as plain TypeError and ValueError (construction, an empty prompt): none of
    # them is a CleverAgentsError, so no class here is excused.
    _import_every_module()
    classes = _all_error_classes()
    assert {cls.__name__ for cls in classes} >= {
        "ToolHandlerError", "SandboxViolationError", "ProfileError", "RunNotFoundError",
        "ModelConfigError", "WorkspaceToolError",
    }  # fmt: skip
    built_in = {
        cls.__qualname__: [base.__name__ for base in cls.__mro__ if base.__module__ == "builtins"]
        for cls in classes
    }
    assert {
        name: bases
        for name, bases in built_in.items()
        if bases != ["Exception", "BaseException", "object"]
    } == {}
