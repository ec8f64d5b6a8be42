"""Reading a JSON Schema before it is compiled: its subschemas by keyword, its regexes
(each compiled with RE2, a refusal naming where it is), and how large it grows once every
``$ref`` is expanded.

The expansion is the ``$ref`` bomb's measure: ``d0 = allOf[d1, d1]``, ``d1 = allOf[d2,
d2]``... is a 2 KB schema that a validator walks 2^30 times per value. Counted with one
visit per subschema (a memo), so counting costs the schema's size, not its expansion.
A ``$ref`` back into a subschema being counted (a recursive schema, a tree) counts once:
recursion is paid per level of the value, and the validation budget bounds that.

Pure functions on the schema as data; no compiler, no fastjsonschema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from ._schema_patterns import Pattern, UnsupportedPattern

MAX_SCHEMA_EXPANSION = 100_000
"""Subschemas a schema may hold with every ``$ref`` expanded in place; more is refused
when the schema is compiled."""

MAX_SCHEMA_DEPTH = 32
"""Subschemas nested deeper are refused at once: a validator nests Python blocks per
level, and Python refuses far fewer (about 20 levels of ``items``); a deeper schema
would only build megabytes of code before that."""

_ONE = ("additionalItems", "additionalProperties", "contains", "propertyNames", "not",
        "if", "then", "else", "items")  # fmt: skip
_MANY = ("allOf", "anyOf", "oneOf", "items")
_NAMED = ("properties", "patternProperties", "definitions", "$defs", "dependencies")


class SchemaProblem(Exception):
    """What is wrong with a schema, and where (a dotted path from its root)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def subschemas(node: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The subschemas of ``node`` that are objects, each with its path step."""
    for key in _ONE:
        child = node.get(key)
        if isinstance(child, Mapping):
            yield key, child
    for key in _MANY:
        children = node.get(key)
        if isinstance(children, list):
            for index, child in enumerate(children):
                if isinstance(child, Mapping):
                    yield f"{key}.{index}", child
    for key in _NAMED:
        named = node.get(key)
        if isinstance(named, Mapping):
            for name, child in named.items():
                if isinstance(child, Mapping):
                    yield f"{key}.{name}", child


def compile_patterns(schema: Mapping[str, Any]) -> dict[str, Pattern]:
    """Every ``pattern`` and ``patternProperties`` regex of ``schema``, compiled with
    RE2; ``SchemaProblem`` naming the first one RE2 cannot run, and where it is, or for
    a schema nested deeper than ``MAX_SCHEMA_DEPTH``."""
    compiled: dict[str, Pattern] = {}
    pending: list[tuple[str, int, Mapping[str, Any]]] = [("", 0, schema)]
    while pending:
        path, depth, node = pending.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaProblem(
                "", f"is nested too deeply to compile (more than {MAX_SCHEMA_DEPTH} levels)"
            )
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            _compile(compiled, pattern, _join(path, "pattern"))
        properties = node.get("patternProperties")
        if isinstance(properties, Mapping):
            for key in properties:
                _compile(compiled, key, _join(path, "patternProperties"))
        pending.extend((_join(path, step), depth + 1, child) for step, child in subschemas(node))
    return compiled


def _compile(compiled: dict[str, Pattern], pattern: str, path: str) -> None:
    if pattern not in compiled:
        try:
            compiled[pattern] = Pattern(pattern)
        except UnsupportedPattern as exc:
            problem = f"pattern {exc.pattern!r} cannot be used: {exc.reason}"
            raise SchemaProblem(path, problem) from None


def _join(path: str, step: str) -> str:
    return f"{path}.{step}" if path else step


def check_expansion(schema: Mapping[str, Any], limit: int = MAX_SCHEMA_EXPANSION) -> int:
    """How many subschemas ``schema`` holds with its ``$ref``s expanded; ``SchemaProblem``
    once that passes ``limit``. Iterative: a chain of a thousand ``$ref``s is a schema a
    tool may have, and must not exhaust Python's recursion."""
    return _Expansion(schema, limit).size(schema)


class _Expansion:
    def __init__(self, root: Mapping[str, Any], limit: int) -> None:
        self.root = root
        self.limit = limit
        self.root_uri = urldefrag(_base_of(root, ""))[0]
        self.ids = _ids(root)

    def size(self, root: Mapping[str, Any]) -> int:
        """Depth first, each subschema counted once (``memo``); a subschema reached again
        while it is being counted (recursion) adds one."""
        memo: dict[int, int] = {}
        counting = {id(root)}
        # Each frame: the subschema, its children still to count, its total so far.
        stack: list[tuple[Mapping[str, Any], Iterator[tuple[Mapping[str, Any], str]], list[int]]]
        stack = [(root, self.children(root, _base_of(root, "")), [1])]
        while True:
            node, children, total = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                counting.discard(id(node))
                memo[id(node)] = total[0]
                if not stack:
                    return total[0]
                stack[-1][2][0] += total[0]
                self.check(stack[-1][2][0])
                continue
            target, base = child
            key = id(target)
            if key in memo:
                total[0] += memo[key]
            elif key in counting:  # recursion: paid per level of the value, not here
                total[0] += 1
            else:
                counting.add(key)
                stack.append((target, self.children(target, base), [1]))
            self.check(total[0])

    def check(self, total: int) -> None:
        if total > self.limit:
            raise SchemaProblem(
                "$ref",
                f"expands to more than {self.limit:,} subschemas (a schema that refers to "
                "the same parts over and over); it is refused",
            )

    def children(
        self, node: Mapping[str, Any], base: str
    ) -> Iterator[tuple[Mapping[str, Any], str]]:
        ref = node.get("$ref")
        if isinstance(ref, str):  # draft 7: a $ref's siblings are ignored
            target = self.resolve(ref, base)
            if target is not None:
                yield target
            return
        for _step, child in subschemas(node):
            yield child, _base_of(child, base)

    def resolve(self, ref: str, base: str) -> tuple[Mapping[str, Any], str] | None:
        uri, fragment = urldefrag(urljoin(base, ref))
        if not uri or uri == self.root_uri:
            document: Any = self.root
            uri = self.root_uri
        else:
            document = self.ids.get(uri)
        if document is None:  # a remote document: refused by the compiler, never fetched
            return None
        if fragment and not fragment.startswith("/"):
            named = self.ids.get(f"{uri}#{fragment}")
            return (named, uri) if isinstance(named, Mapping) else None
        for part in unquote(fragment).lstrip("/").split("/") if fragment else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(document, Mapping) and part in document:
                document = document[part]
            elif isinstance(document, list) and part.isdigit() and int(part) < len(document):
                document = document[int(part)]
            else:
                return None
        return (document, uri) if isinstance(document, Mapping) else None


def _base_of(node: Mapping[str, Any], base: str) -> str:
    schema_id = node.get("$id", node.get("id"))
    return urljoin(base, schema_id) if isinstance(schema_id, str) else base


def _ids(root: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Each ``$id`` of the schema, resolved against the ones around it, to its subschema."""
    found: dict[str, Mapping[str, Any]] = {}
    pending: list[tuple[Mapping[str, Any], str]] = [(root, "")]
    while pending:
        node, base = pending.pop()
        here = _base_of(node, base)
        if here != base:
            found.setdefault(here.rstrip("#"), node)
        pending.extend((child, here) for _step, child in subschemas(node))
    return found
