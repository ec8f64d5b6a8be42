"""JSON Schema export of the wire types, straight from the attrs classes.

``python -m cleveragents.protocol.schema`` (or ``scripts/gen-schema``) writes
``client-protocol/schema/``; a test regenerates in memory and fails when the files are
stale, the way pygls checks its generated code.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import attrs

from ._converter import camel, is_optional
from ._methods import LIFECYCLE_TYPES, METHODS, PROTOCOL_VERSION

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if tp is Any:
        return {}
    if tp is type(None):
        return {"type": "null"}
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        return {"anyOf": [_type_schema(a, defs) for a in args]}
    if origin is list:
        (item,) = typing.get_args(tp)
        return {"type": "array", "items": _type_schema(item, defs)}
    if origin is dict:
        _, value = typing.get_args(tp)
        value_schema = _type_schema(value, defs)
        return {
            "type": "object",
            **({"additionalProperties": value_schema} if value_schema else {}),
        }
    if attrs.has(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # reserve: breaks recursion
            defs[name] = _class_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    raise TypeError(f"no JSON Schema mapping for {tp!r}")


def _strip_none(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field's schema without its ``null`` branch (absent, not null)."""
    branches = schema.get("anyOf")
    if branches is None:
        return schema
    kept = [b for b in branches if b != {"type": "null"}]
    return kept[0] if len(kept) == 1 else {"anyOf": kept}


def _class_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        schema = _type_schema(hints[field.name], defs)
        if is_optional(field):
            schema = _strip_none(schema)
        else:
            required.append(camel(field.name))
        properties[camel(field.name)] = schema
    out: dict[str, Any] = {"type": "object"}
    doc = (cls.__doc__ or "").strip().split("\n\n")[0]
    if doc and not doc.startswith(cls.__name__ + "("):
        out["description"] = " ".join(doc.split())
    out["properties"] = properties
    if required:
        out["required"] = required
    if getattr(cls, "__wire_strict__", False):
        out["additionalProperties"] = False
    return out


def protocol_schema() -> dict[str, Any]:
    """One document: every wire type under ``$defs`` and the method table."""
    defs: dict[str, Any] = {}
    methods: dict[str, Any] = {}
    for method in METHODS:
        entry: dict[str, Any] = {
            "kind": method.kind,
            "direction": method.direction,
            "summary": method.summary,
            "params": _type_schema(method.params, defs),
        }
        if method.result is not None:
            entry["result"] = _type_schema(method.result, defs)
        methods[method.name] = entry
    for cls in LIFECYCLE_TYPES:
        _type_schema(cls, defs)
    return {
        "$schema": DRAFT,
        "$id": "urn:cleveragents:protocol:v1",
        "title": "cleveragents daemon protocol",
        "protocolVersion": PROTOCOL_VERSION,
        "methods": methods,
        "$defs": dict(sorted(defs.items())),
    }


def render() -> dict[str, str]:
    """File name -> content of everything under ``client-protocol/schema/``."""
    document = protocol_schema()
    files = {"protocol.schema.json": _dump(document)}
    for name, schema in document["$defs"].items():
        files[f"{name}.schema.json"] = _dump(
            {"$schema": DRAFT, "title": name, **schema, "$defs": document["$defs"]}
        )
    return files


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False) + "\n"


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for old in directory.glob("*.schema.json"):
        old.unlink()
    for name, content in render().items():
        path = directory / name
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written
