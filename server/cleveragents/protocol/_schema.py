"""The generated form of protocol v1: one JSON Schema document and the method table.

``client-protocol/schema/`` holds

- ``protocol.schema.json``: every wire type under ``$defs`` (draft 2020-12), with
  ``$id`` :data:`SCHEMA_ID`, an identifier that is never fetched;
- ``methods.json``: the method table (name, kind, direction, params and result as
  ``$ref`` into ``protocol.schema.json``, summary), where ``initialize`` carries which
  type, and the error classes on the wire (name, code, description), as the Agent Client
  Protocol publishes ``meta.json``;
- ``NAME.schema.json``: a stub per type, only a ``$ref`` into the document, for tools that
  want one file per type.

A description is a class's first docstring paragraph or a field's docstring, in plain
text; when it has code spans, ``markdownDescription`` holds it in Markdown too. The error
classes come in as an argument: they live in every layer, and ``protocol`` may import only
the core (``cleveragents._codegen`` collects them). :func:`write` also regenerates the field tables
of ``PROTOCOL.md`` beside the schema directory (see ``_doc``). A test renders everything
in memory and fails when the committed files are stale, as pygls checks its generated code.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import json
import re
import textwrap
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Union

import attrs

from ..tool import CleverAgentsError
from ._converter import camel, is_optional
from ._doc import DOC_NAME, refresh
from ._methods import LIFECYCLE, METHODS, PROTOCOL_VERSION

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:cleveragents:protocol:v1"
DOCUMENT = "protocol.schema.json"
METHOD_TABLE = "methods.json"
STUB_SUFFIX = ".schema.json"

_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([^`]+)`")
_CODE = re.compile(r"``(.+?)``|`([^`]+)`")


def plain(doc: str) -> str:
    """Docstring text without reStructuredText markup, on one line."""
    text = _ROLE.sub(r"\1", " ".join(doc.split()))
    return _CODE.sub(lambda m: m.group(1) or m.group(2), text)


def markdown(doc: str) -> str:
    """Docstring text with its code spans in Markdown's single backticks, on one line."""
    text = _ROLE.sub(r"``\1``", " ".join(doc.split()))
    return _CODE.sub(lambda m: f"`{m.group(1) or m.group(2)}`", text)


def described(doc: str) -> dict[str, str]:
    """``description`` (plain text) and, when it has code spans, ``markdownDescription``
    (the keyword editors such as VS Code render, and the doc tables use)."""
    if not doc.strip():
        return {}
    text, rich = plain(doc), markdown(doc)
    return {"description": text, **({"markdownDescription": rich} if rich != text else {})}


def _summary(cls: type) -> str:
    """The first paragraph of a class's own docstring (attrs' generated one is none)."""
    doc = (cls.__dict__.get("__doc__") or "").strip().split("\n\n")[0]
    return "" if doc.startswith(cls.__name__ + "(") else doc


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring: the string literal below it in the class body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = typing.cast(ast.ClassDef, ast.parse(source).body[0]).body
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = following.value.value
    return docs


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    scalar = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if tp is Any:
        return {}
    if tp is type(None):
        return {"type": "null"}
    if tp in scalar:
        return {"type": scalar[tp]}
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type_schema(arg, defs) for arg in typing.get_args(tp)]}
    if origin is list:
        (item,) = typing.get_args(tp)
        return {"type": "array", "items": _type_schema(item, defs)}
    if origin is dict:
        value = _type_schema(typing.get_args(tp)[1], defs)
        return {"type": "object", **({"additionalProperties": value} if value else {})}
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
    docs = field_docs(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        schema = _type_schema(hints[field.name], defs)
        if is_optional(field):
            schema = _strip_none(schema)
        else:
            required.append(camel(field.name))
        properties[camel(field.name)] = {**schema, **described(docs.get(field.name, ""))}
    out: dict[str, Any] = {"type": "object", **described(_summary(cls))}
    out["properties"] = properties
    if required:
        out["required"] = required
    if getattr(cls, "__wire_strict__", False):
        out["additionalProperties"] = False
    return out


def protocol_schema() -> dict[str, Any]:
    """The document: every type reachable from the method table and ``initialize``."""
    defs: dict[str, Any] = {}
    for method in METHODS:
        _type_schema(method.params, defs)
        if method.result is not None:
            _type_schema(method.result, defs)
    for cls in LIFECYCLE:
        _type_schema(cls, defs)
    return {
        "$schema": DRAFT,
        "$id": SCHEMA_ID,
        "title": f"cleveragents daemon protocol, version {PROTOCOL_VERSION}",
        "description": "Every wire type of the protocol; methods.json says which method "
        "carries which. The spec is client-protocol/PROTOCOL.md.",
        "$defs": dict(sorted(defs.items())),
    }


def _ref(cls: type) -> dict[str, str]:
    return {"$ref": f"{DOCUMENT}#/$defs/{cls.__name__}"}


def method_table(errors: Sequence[type[CleverAgentsError]]) -> dict[str, Any]:
    """``methods.json``: the methods, the ``initialize`` types and the error classes."""
    methods = []
    for method in METHODS:
        entry: dict[str, Any] = {
            "name": method.name,
            "kind": method.kind,
            "direction": method.direction,
            "params": _ref(method.params),
        }
        if method.result is not None:
            entry["result"] = _ref(method.result)
        entry["summary"] = method.summary
        methods.append(entry)
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "schema": SCHEMA_ID,
        "methods": methods,
        "initialize": [{"where": where, **_ref(cls)} for cls, where in LIFECYCLE.items()],
        "errors": [
            {"name": cls.__name__, "code": cls.code, "description": plain(_summary(cls))}
            for cls in sorted(errors, key=lambda cls: -cls.code)
        ],
    }


def render(errors: Sequence[type[CleverAgentsError]]) -> dict[str, str]:
    """File name -> content of everything under ``client-protocol/schema/``."""
    document = protocol_schema()
    files = {DOCUMENT: _dump(document), METHOD_TABLE: _dump(method_table(errors))}
    for name in document["$defs"]:
        stub = {"$schema": DRAFT, "title": name, "$ref": f"{DOCUMENT}#/$defs/{name}"}
        files[name + STUB_SUFFIX] = _dump(stub)
    return files


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def write(directory: Path, errors: Sequence[type[CleverAgentsError]]) -> list[Path]:
    """Write the schema directory, dropping files no type owns any more, and regenerate
    the field tables of ``PROTOCOL.md`` beside it when it is there. Returns what changed."""
    directory.mkdir(parents=True, exist_ok=True)
    files = render(errors)
    written = []
    for old in directory.glob("*.json"):
        if old.name not in files:
            old.unlink()
            written.append(old)
    for name, content in files.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8")
            written.append(path)
    doc = directory.parent / DOC_NAME
    if doc.exists():
        text = doc.read_text(encoding="utf-8")
        fresh = refresh(text, protocol_schema())
        if fresh != text:
            doc.write_text(fresh, encoding="utf-8")
            written.append(doc)
    return written
