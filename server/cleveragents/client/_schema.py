"""A client tool's input schema and description, inferred from a Python function.

``@client.tool`` uses it, as openai-agents' ``function_tool`` does: each parameter's type
hint becomes its JSON Schema, a parameter without a default is required, the docstring's
first paragraph is the tool's description and its ``Args:`` section (Google style) or
``:param NAME:`` lines (Sphinx style) describe the parameters.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``list[T]``,
``tuple[T, ...]``, ``set[T]``, ``dict[str, T]``, ``Literal[...]``, ``Enum`` subclasses,
unions (``T | None``) and ``Annotated[T, "description"]``. Any other hint is a
``TypeError`` naming the parameter: pass ``input_schema=`` to write the schema by hand.

Knows nothing of the wire or of the daemon: it maps a function to a schema, nothing more.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}
_GOOGLE_ARGS = re.compile(r"^\s*(?:Args|Arguments|Parameters)\s*:\s*$")
_GOOGLE_SECTION = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_GOOGLE_ITEM = re.compile(r"^(\s*)(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def function_schema(function: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
    """``(description, input_schema)`` for a function called with keyword arguments."""
    signature = inspect.signature(function)
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except (NameError, TypeError) as exc:
        raise TypeError(f"cannot read the type hints of {_name(function)}: {exc}") from None
    summary, described = _docstring(inspect.getdoc(function) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra = False
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise TypeError(
                f"{_name(function)}: parameter {name!r} cannot be passed by keyword; "
                "a tool is called with its arguments as keywords"
            )
        hint = hints.get(name, Any)
        try:
            schema = hint_schema(hint)
        except TypeError as exc:
            raise TypeError(
                f"{_name(function)}: parameter {name!r}: {exc}; pass input_schema= instead"
            ) from None
        if name in described and "description" not in schema:
            schema["description"] = described[name]
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
        elif _is_json(parameter.default):
            schema["default"] = parameter.default
        properties[name] = schema
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    if not extra:
        input_schema["additionalProperties"] = False
    return summary, input_schema


def hint_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one type hint; ``TypeError`` for a hint it cannot express."""
    if hint is Any or hint is object:
        return {}
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = hint_schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or origin is types.UnionType:
        options = [hint_schema(arg) for arg in args]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin in (list, set, frozenset) or hint in (list, set, frozenset):
        schema = {"type": "array"}
        if args:
            schema["items"] = hint_schema(args[0])
        if origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin is tuple or hint is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": hint_schema(args[0])}
        if args:
            items = [hint_schema(arg) for arg in args]
            return {"type": "array", "prefixItems": items, "minItems": len(items),
                    "maxItems": len(items)}  # fmt: skip
        return {"type": "array"}
    if origin is dict or hint is dict:
        if args and args[0] is not str:
            raise TypeError("JSON object keys are strings: use dict[str, ...]")
        schema = {"type": "object"}
        if args:
            schema["additionalProperties"] = hint_schema(args[1])
        return schema
    raise TypeError(f"no JSON Schema for the type {hint!r}")


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (joined on one line) and each parameter's description."""
    lines = doc.splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or _GOOGLE_ARGS.match(line) or _SPHINX_PARAM.match(line):
            break
        summary_lines.append(line.strip())
    described: dict[str, str] = {}
    in_args = False
    indent: int | None = None
    current: str | None = None
    for line in lines:
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current = sphinx.group(1)
            described[current] = sphinx.group(2).strip()
            in_args = False
            continue
        if _GOOGLE_ARGS.match(line):
            in_args, indent, current = True, None, None
            continue
        if not in_args:
            continue
        if _GOOGLE_SECTION.match(line) and (indent is None or _indent(line) < indent):
            in_args = False
            continue
        item = _GOOGLE_ITEM.match(line)
        if item and (indent is None or len(item.group(1)) == indent):
            indent = len(item.group(1))
            current = item.group(2).lstrip("*")
            described[current] = item.group(3).strip()
        elif current is not None and line.strip():
            described[current] = f"{described[current]} {line.strip()}".strip()
    return " ".join(summary_lines), described


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or repr(function)
