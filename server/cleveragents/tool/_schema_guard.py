"""Compiling a JSON Schema into a validator that cannot freeze its caller, whoever wrote
the schema and the value.

fastjsonschema turns a schema into Python code; this module drives its code generator
with four changes, so a schema from outside (an MCP server's, an editor's client tool's)
costs bounded time to compile and each value bounded time to check:

* **Regexes run in RE2** (``_schema_patterns``): ``pattern``, ``patternProperties``,
  ``format`` and the ``regex`` format are matched in linear time; a pattern RE2 cannot
  run is refused naming it and where it is.
* **No ``$ref`` bomb**: a schema that expands to more than ``MAX_SCHEMA_EXPANSION``
  subschemas is refused (``_schema_walk``), and the error messages of the generated code
  no longer quote each subschema with its ``$ref``s expanded (fastjsonschema's did: a
  2 KB schema could make megabytes of code).
* **Bounded code**: a validator over ``MAX_VALIDATOR_SOURCE`` characters of source is
  refused while it is generated, and its source is compiled one function at a time, none
  over ``MAX_FUNCTION_SOURCE`` (Python's ``compile`` holds the interpreter's lock
  throughout: about 0.85 s per MiB of source here).
* **A budget per value**: the generated code checks the clock on entering each function
  (a ``$ref``), at each item of a loop, and before each regex; a check that runs past
  ``VALIDATION_BUDGET_S`` and then uses as much CPU time again raises
  :class:`ValidationBudgetExceeded` (so a thread kept waiting on a busy machine never
  fails a good value, and a check holds its thread at most about twice the budget).
  Between two clock readings runs at most one regex over one string (linear) or one
  comparison.

The deadline is threaded through the generated functions as their ``custom_formats``
argument, which this module's validators never use for formats.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema
from fastjsonschema.draft04 import CodeGeneratorDraft04
from fastjsonschema.draft06 import CodeGeneratorDraft06
from fastjsonschema.draft07 import CodeGeneratorDraft07
from fastjsonschema.draft2019 import CodeGeneratorDraft2019
from fastjsonschema.ref_resolver import RefResolver

from ._schema_patterns import Pattern, RegexFormat, UnsupportedPattern, format_pattern
from ._schema_walk import SchemaProblem, check_expansion, compile_patterns

VALIDATION_BUDGET_S = 0.05
"""How long checking one value against one schema may run; past it, and once the check
has used as much CPU time again, the value is refused. So a check holds the thread it
runs on (the event loop, for a call's arguments) for about 100 ms at most."""
MAX_VALIDATOR_SOURCE = 2 * 1024 * 1024
"""Characters of Python source a schema's validator may take, indentation aside; a larger
one is refused."""
MAX_FUNCTION_SOURCE = 256 * 1024
"""Characters of one generated function (one subschema and everything in it but its
``$ref``s); a larger one is refused."""

_perf = time.perf_counter


class SchemaDefinitionError(ValueError):
    """A schema that is not a valid JSON Schema (draft 7), or that cannot be checked in
    bounded time. ``path`` leads from the schema's root to the offending keyword, so a
    caller can name the field: ``properties``, ``properties.x.pattern``."""

    def __init__(self, path: str, problem: str, field: str = "") -> None:
        where = ".".join(part for part in (field, path) if part) or "the schema"
        super().__init__(f"invalid JSON Schema: {where} {problem}")
        self.path = path
        self.problem = problem
        self.field = field
        """Which of a tool's schemas: ``input_schema`` or ``output_schema``."""


class ValidationBudgetExceeded(Exception):
    """Checking one value ran past its budget (``budget_s`` seconds)."""

    def __init__(self, budget_s: float) -> None:
        super().__init__(f"checking the value took longer than {budget_s * 1000:g} ms")
        self.budget_s = budget_s


class _OverBudget(Exception):
    """Raised by the generated code at a check past its budget."""


def _late(budget: list[Any]) -> None:
    """A check found the clock past the deadline (``budget``: the deadline, the budget in
    seconds, the thread's CPU time when first late). Only a check that has used the CPU
    is over: a thread kept waiting (descheduled on a busy machine, or another thread
    holding the interpreter's lock) must not fail a good value. So the first time it is
    late the check goes on, and it is over once it has used ``budget_s`` more of CPU time
    (``time.thread_time``, a system call: read only here, never per value)."""
    cpu = time.thread_time()
    if budget[2] is None:
        budget[2] = cpu
    elif cpu - budget[2] >= budget[1]:
        raise _OverBudget
    budget[0] = _perf() + budget[1] - (cpu - budget[2])


class CompiledSchema:
    """A schema's validator: ``validator(value)`` returns ``None`` or raises
    ``fastjsonschema.JsonSchemaValueException`` (naming the failing field) or
    :class:`ValidationBudgetExceeded`. ``key`` is the schema's canonical JSON text and
    ``size`` its validator's source length (what a cache weighs it by)."""

    __slots__ = ("__weakref__", "_validate", "key", "size")

    def __init__(self, validate: Callable[..., Any], key: str, size: int) -> None:
        self._validate = validate
        self.key = key
        self.size = size

    def __call__(self, value: Any, budget_s: float = VALIDATION_BUDGET_S) -> None:
        try:
            self._validate(value, [_perf() + budget_s, budget_s, None])
        except _OverBudget:
            raise ValidationBudgetExceeded(budget_s) from None


class _TooLarge(Exception):
    pass


def compile_guarded(schema: Mapping[str, Any], key: str) -> CompiledSchema:
    """The validator of ``schema``, whose canonical JSON text is ``key``. It compiles a
    copy (fastjsonschema's resolver rewrites ``$ref`` values in place, and the caller's
    schema may be what a model is shown). Raises ``SchemaDefinitionError``."""
    schema = json.loads(json.dumps(schema))
    try:
        if isinstance(schema, Mapping):
            patterns = compile_patterns(schema)
            check_expansion(schema)
        else:
            patterns = {}
        resolver = RefResolver.from_schema(dict(schema), handlers=_NO_REMOTE_REFS, store={})
        generator = _generator_class(schema)(schema, resolver, patterns)
        source = generator.func_code
        namespace = generator.global_state
    except SchemaProblem as exc:
        raise SchemaDefinitionError(exc.path, exc.problem) from None
    except UnsupportedPattern as exc:
        raise SchemaDefinitionError(
            "", f"has pattern {exc.pattern!r}, which cannot be used: {exc.reason}"
        ) from None
    except _TooLarge:
        raise SchemaDefinitionError(
            "", f"is too large to check: its validator would exceed {_kib(MAX_VALIDATOR_SOURCE)}"
        ) from None
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        raise SchemaDefinitionError("", f"cannot be compiled: {exc}") from None
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        raise SchemaDefinitionError("", f"cannot be compiled ({type(exc).__name__})") from None
    namespace["re"] = RegexFormat  # the "regex" format: ``re.compile(value)`` is RE2's
    namespace["_perf"] = _perf
    namespace["_late"] = _late
    for chunk in _functions(_with_budget_checks(source)):
        if _size(chunk) > MAX_FUNCTION_SOURCE:
            raise SchemaDefinitionError(
                "",
                f"is too large to check: one of its parts would need over "
                f"{_kib(MAX_FUNCTION_SOURCE)} of code (split it with definitions and $ref)",
            )
        exec(compile(chunk, "<schema validator>", "exec"), namespace)
    return CompiledSchema(namespace[resolver.get_scope_name()], key, _size(source))


def _size(source: str) -> int:
    """Characters of ``source`` but its indentation."""
    return sum(len(line.lstrip(" ")) + 1 for line in source.split("\n"))


def _kib(size: int) -> str:
    return f"{size // 1024:,} KiB"


class _NoRemoteRefs(dict[str, Callable[[str], Any]]):
    """URI handlers for every scheme, each refusing: the compiler would otherwise fetch a
    remote ``$ref`` with urllib, blocking on the network."""

    def __contains__(self, scheme: object) -> bool:
        return True

    def __missing__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_remote


def _refuse_remote(uri: str) -> Any:
    raise fastjsonschema.JsonSchemaDefinitionException(f"remote $ref {uri!r} is not fetched")


_NO_REMOTE_REFS = _NoRemoteRefs()

_TICK = "if _perf() > custom_formats[0]: _late(custom_formats)"
"""A budget check: the generated functions pass their ``custom_formats`` argument on to
each other, so it carries the budget (see ``_late``) to every one."""


def _with_budget_checks(source: str) -> str:
    """``source`` with a budget check first in every function and every loop body."""
    lines: list[str] = []
    for line in source.split("\n"):
        lines.append(line)
        code = line.lstrip(" ")
        if code.endswith(":") and (code.startswith("def ") or code.startswith("for ")):
            lines.append(" " * (len(line) - len(code) + 4) + _TICK)
    return "\n".join(lines)


def _functions(source: str) -> list[str]:
    """``source`` cut before each top-level statement, so each is compiled on its own."""
    chunks: list[list[str]] = [[]]
    for line in source.split("\n"):
        if line and not line.startswith(" ") and chunks[-1]:
            chunks.append([])
        chunks[-1].append(line)
    return ["\n".join(chunk) for chunk in chunks]


class _Guarded:
    """What the guarded generators change in fastjsonschema's (mixed in before them;
    fastjsonschema is untyped, so what the mixin uses of it is typed ``Any`` here)."""

    _code: Any
    _compile_regexps: Any
    _definition: Any
    _variable: Any
    _variable_name: Any
    func_code: str
    global_state: dict[str, Any]

    def __init__(
        self, definition: Any, resolver: RefResolver, patterns: dict[str, Pattern]
    ) -> None:
        self._source_size = 0
        self._patterns = patterns
        super().__init__(  # type: ignore[call-arg]
            definition,
            resolver=resolver,
            formats={},
            use_default=False,  # a validator never writes defaults into a value
            use_formats=True,
            detailed_exceptions=True,
            fast_fail=True,
        )

    def l(self, line: str, *args: Any, **kwds: Any) -> Any:  # noqa: E743 - fastjsonschema's name
        indent = super().l(line, *args, **kwds)  # type: ignore[misc]
        # Indentation is not counted: it is what a deep schema adds, and Python's own
        # limit on nesting refuses that one with a clearer word ("nested too deeply").
        self._source_size += len(self._code[-1].lstrip(" ")) + 1
        if self._source_size > MAX_VALIDATOR_SOURCE:
            raise _TooLarge
        return indent

    def e(self, string: Any) -> str:
        return super().e(string)  # type: ignore[misc, no-any-return]

    def exc(
        self, msg: str, *args: Any, append_to_msg: str | None = None, rule: str | None = None
    ) -> None:
        """fastjsonschema's ``exc`` without the subschema in the exception: it quoted it
        with its ``$ref``s expanded, which is how a small schema made megabytes of code."""
        arg = '"' + msg + '"'
        if append_to_msg:
            arg += " + (" + append_to_msg + ")"
        definition = self._definition
        rule_value = definition.get(rule) if isinstance(definition, dict) else None
        self.l(
            "raise JsonSchemaValueException(" + arg + ', value={variable}, name="{name}", '
            "definition=None, rule={rule})",
            *args,
            rule=repr(rule),
            definition_rule=self.e(rule_value),
        )

    def _pattern(self, pattern: str) -> Pattern:
        compiled = self._patterns.get(pattern)
        if compiled is None:  # a subschema reached only through a $ref into data
            compiled = self._patterns[pattern] = Pattern(pattern)
        return compiled

    def generate_pattern(self) -> None:
        with self.l("if isinstance({variable}, str):"):
            pattern = self._definition["pattern"]
            self._compile_regexps[pattern] = self._pattern(pattern)
            self.l(_TICK)
            with self.l("if not REGEX_PATTERNS[{}].search({variable}):", repr(pattern)):
                self.exc("{name} must match pattern {}", self.e(pattern), rule="pattern")

    def generate_pattern_properties(self) -> None:
        self.create_variable_is_dict()  # type: ignore[attr-defined]
        with self.l("if {variable}_is_dict:"):
            self.create_variable_keys()  # type: ignore[attr-defined]
            definitions = self._definition["patternProperties"]
            if not definitions:
                return
            for pattern in definitions:
                self._compile_regexps[pattern] = self._pattern(pattern)
            with self.l("for {variable}_key, {variable}_val in {variable}.items():"):
                for pattern, definition in definitions.items():
                    self.l(_TICK)
                    with self.l("if REGEX_PATTERNS[{}].search({variable}_key):", repr(pattern)):
                        with self.l("if {variable}_key in {variable}_keys:"):
                            self.l("{variable}_keys.remove({variable}_key)")
                        self.generate_func_code_block(  # type: ignore[attr-defined]
                            definition,
                            f"{self._variable}_val",
                            f"{self._variable_name}.{{{self._variable}_key}}",
                            clear_variables=True,
                        )

    def generate_required(self) -> None:
        """fastjsonschema's, with the compile-time check (a required property that no
        ``properties`` or ``patternProperties`` allows) matched by RE2, not ``re``."""
        definition = self._definition
        required = definition["required"]
        if not isinstance(required, list | tuple):
            raise fastjsonschema.JsonSchemaDefinitionException("required must be an array")
        if not definition.get("additionalProperties", True):
            properties = definition.get("properties", {})
            patterns = [self._pattern(p) for p in definition.get("patternProperties", {})]
            impossible = [
                name
                for name in required
                if name not in properties and not any(p.search(name) for p in patterns)
            ]
            if impossible:
                raise fastjsonschema.JsonSchemaDefinitionException(
                    f"{self._variable}: items {impossible} are required but not allowed"
                )
            definition = {**definition, "additionalProperties": True}
        saved, self._definition = self._definition, definition
        try:
            super().generate_required()  # type: ignore[misc]
        finally:
            self._definition = saved

    def _generate_format(self, format_name: str, regexp_name: str, regexp: str) -> None:
        if self._definition["format"] != format_name:
            return
        if regexp_name not in self._compile_regexps:
            checker = format_pattern(format_name, regexp)
            if checker is None:
                self.l("pass")
                return
            self._compile_regexps[regexp_name] = checker
        self.l(_TICK)
        with self.l('if not REGEX_PATTERNS["{}"].search({variable}):', regexp_name):
            self.exc("{name} must be {}", format_name, rule="format")


class _Draft04(_Guarded, CodeGeneratorDraft04):
    pass


class _Draft06(_Guarded, CodeGeneratorDraft06):
    pass


class _Draft07(_Guarded, CodeGeneratorDraft07):
    pass


class _Draft2019(_Guarded, CodeGeneratorDraft2019):
    pass


def _generator_class(schema: Any) -> type[_Guarded]:
    """fastjsonschema's choice of draft (``$schema``; draft 2019-09's when absent)."""
    version = schema.get("$schema", "") if isinstance(schema, dict) else ""
    if not isinstance(version, str):
        version = ""
    if "draft-04" in version:
        return _Draft04
    if "draft-06" in version:
        return _Draft06
    if "draft-07" in version:
        return _Draft07
    return _Draft2019
