"""``ToolSpec``: what a tool is (name, schemas, annotations, timeout, handler, lifecycle hooks).

A spec compiles its validators once, when it is built, so the hot path never compiles a
schema; identical schemas share one compiled validator while a bounded cache keeps it.
Schemas may come from outside (an MCP server, an editor), and so may the values checked
against them: compiling and checking are bounded (``_schema_guard``: regexes in RE2, no
``$ref`` bomb, a time budget per value). It also reads its handler's
parameters once and puts the handler behind one calling shape (``ToolSpec.invoke``), so
no call site needs to know which of the two shapes a tool was written in.
"""

from __future__ import annotations

import collections
import inspect
import json
import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import attrs
import fastjsonschema

from ._errors import InvalidToolNameError, ToolError, ToolInputError, ToolOutputError
from ._schema_guard import (
    VALIDATION_BUDGET_S,
    CompiledSchema,
    ValidationBudgetExceeded,
    compile_guarded,
)
from ._schema_guard import SchemaDefinitionError as SchemaDefinitionError
from ._types import (
    RESERVED_INPUT_KEYS,
    JSONValue,
    ToolActorContext,
    ToolCall,
    ToolCallContext,
    ToolSchema,
)

if TYPE_CHECKING:
    from ._cancel import CancelToken

TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")

ToolKind = Literal["read", "write", "execute"]

ToolHandler = (
    Callable[[dict[str, JSONValue]], JSONValue | Awaitable[JSONValue]]
    | Callable[[dict[str, JSONValue], ToolCallContext], JSONValue | Awaitable[JSONValue]]
)
"""``handler(inputs)`` or ``handler(inputs, context)``: one dict of inputs (the model's
arguments plus the reserved keys), and, when the handler takes a second parameter, the
``ToolCallContext`` of the call (call id, iteration, run context, cancel token)."""

LifecycleHook = Callable[[ToolActorContext], Awaitable[None] | None]


class RunScope(Protocol):
    """What a call's ``ToolCallContext`` takes from its run (the runner's session)."""

    @property
    def context(self) -> ToolActorContext: ...

    @property
    def cancel(self) -> CancelToken: ...


Invoke: TypeAlias = Callable[[dict[str, JSONValue], ToolCall, int, RunScope], Any]
"""``invoke(inputs, call, iteration, run)``: the one shape in which the runner calls every
handler, whichever of the two it was written in; it answers the output (any JSON) or an
awaitable of it. The ``ToolCallContext`` is built from
``call``, ``iteration`` and ``run`` only for a handler that takes it (building one costs
more than a handler that ignores it)."""

Validator = Callable[[JSONValue], None]


@attrs.define(slots=True, frozen=True)
class ToolAnnotations:
    """Hints about a tool's effects; automation profiles map them to a kind."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


MAX_CACHED_VALIDATORS = 512
"""Compiled validators the shared cache keeps for reuse, the least recently used dropped
first. A spec holds its own validators; the cache only lets identical schemas share one."""
MAX_CACHED_SOURCE = 32 * 1024 * 1024
"""Characters of validator source the cache may hold (a validator's memory follows it)."""


class _ValidatorCache:
    """Compiled validators by schema, bounded by count and by size (LRU).

    The lock guards the table only: compiling runs outside it, so a thread compiling a
    large schema never holds up another's lookup (two threads compiling the same schema
    at once keep the first one's)."""

    def __init__(self, max_count: int, max_size: int) -> None:
        self.max_count = max_count
        self.max_size = max_size
        self.size = 0
        self._entries: collections.OrderedDict[str, CompiledSchema] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> CompiledSchema | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, validator: CompiledSchema) -> CompiledSchema:
        with self._lock:
            kept = self._entries.get(validator.key)
            if kept is not None:
                return kept
            self._entries[validator.key] = validator
            self.size += validator.size
            while len(self._entries) > 1 and (
                len(self._entries) > self.max_count or self.size > self.max_size
            ):
                _key, dropped = self._entries.popitem(last=False)
                self.size -= dropped.size
            return validator

    def discard(self, validator: CompiledSchema) -> None:
        with self._lock:
            if self._entries.get(validator.key) is validator:
                del self._entries[validator.key]
                self.size -= validator.size


_validators = _ValidatorCache(MAX_CACHED_VALIDATORS, MAX_CACHED_SOURCE)

_meta_validator: Validator | None = None


def _check_definition(schema: Mapping[str, JSONValue]) -> None:
    """Check ``schema`` against the draft-7 meta-schema (compiled on first use), so a
    malformed schema is refused naming its keyword instead of failing inside the
    compiler with whatever that raised."""
    global _meta_validator
    if _meta_validator is None:
        # Generated from DRAFT_07 (scripts/gen-validators): compiling it at start-up
        # cost every process ~50 ms.
        from ._draft7_validator import validate_http___json_schema_org_draft_07_schema as validate

        _meta_validator = validate
    try:
        _meta_validator(schema)
    except fastjsonschema.JsonSchemaValueException as exc:
        path = ".".join(str(part) for part in (exc.path or [])[1:])
        problem = str(exc.message).split(" ", 1)[1] if " " in str(exc.message) else "is invalid"
        if exc.rule == "anyOf":  # "cannot be validated by any definition": say what is
            problem = "is not a valid value for this keyword"
        raise SchemaDefinitionError(path, problem) from None


def compile_schema(schema: Mapping[str, JSONValue]) -> CompiledSchema:
    """Compile a JSON Schema once; identical schemas share one validator while the
    shared cache keeps it.

    ``SchemaDefinitionError`` (a ``ValueError``) names the keyword of a schema that is
    not valid JSON Schema, a pattern RE2 cannot run, a ``$ref`` bomb, a schema too large
    to check, or one nested too deeply to compile (Python caps how deeply blocks nest)."""
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        validator = _validators.get(key)
        if validator is None:
            _check_definition(schema)
            validator = _validators.put(compile_guarded(schema, key))
        return validator
    except (RecursionError, SyntaxError, MemoryError) as exc:  # IndentationError: a SyntaxError
        raise SchemaDefinitionError(
            "", f"is nested too deeply to compile ({type(exc).__name__})"
        ) from None


def _compile_field(schema: Mapping[str, JSONValue], field: str) -> CompiledSchema:
    try:
        return compile_schema(schema)
    except SchemaDefinitionError as exc:
        raise SchemaDefinitionError(exc.path, exc.problem, field) from None


class _OnFirstUse:
    """A schema's validator compiled when it is first called. Only a built-in tool's
    schemas are left for later (``ToolSpec.validators_on_first_use``): they are the
    project's own, each compiled by a test, and compiling the six of them cost every
    daemon ~14 ms before its ``initialize`` reply. Anyone else's schema is compiled when
    its spec is built, so a bad one is refused there."""

    __slots__ = ("_field", "_schema", "compiled")

    def __init__(self, schema: Mapping[str, JSONValue], field: str) -> None:
        self._schema = schema
        self._field = field
        self.compiled: CompiledSchema | None = None

    def __call__(self, value: Any, budget_s: float = VALIDATION_BUDGET_S) -> None:
        compiled = self.compiled
        if compiled is None:  # two threads at once compile twice; the cache keeps one
            compiled = self.compiled = _compile_field(self._schema, self._field)
        compiled(value, budget_s)


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` returns a coroutine (functions, methods, callable objects)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a callable object's method
    )


class ToolHandlerError(ToolError):
    """A handler that cannot be called as ``handler(inputs)`` or ``handler(inputs,
    context)``. Raised when the spec is built, never per call; its code is
    ``ToolError.code``. Not a ``TypeError``: the reference's error table names
    ``TypeError`` only for the runtime's own constructor arguments."""


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def takes_call_context(name: str, handler: object) -> bool:
    """Whether ``handler`` takes the ``ToolCallContext`` as a second parameter: it has
    two required positional parameters. Read once, when the spec is built."""
    if not callable(handler):
        raise ToolHandlerError(f"tool {name!r}: handler must be callable")
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: called with inputs
        return False
    required = [p for p in parameters if p.kind in _POSITIONAL and p.default is p.empty]
    keyword_only = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > 2 or keyword_only:
        names = ", ".join(p.name for p in required) + "".join(f", *, {k}" for k in keyword_only)
        raise ToolHandlerError(
            f"tool {name!r}: a handler takes (inputs) or (inputs, context), not ({names})"
        )
    return len(required) == 2


def invoker(name: str, handler: ToolHandler, takes_context: bool) -> Invoke:
    """``handler`` behind the one calling shape, :data:`Invoke`: one frame that passes
    the inputs on, and for a handler of two parameters its ``ToolCallContext``."""
    # Its parameters were read when the spec was built (``takes_call_context``): the
    # handler is called as a callable of the arity found there.
    handle: Callable[..., Any] = handler
    if not takes_context:

        def invoke(
            inputs: dict[str, JSONValue], tool_call: ToolCall, iteration: int, run: RunScope
        ) -> Any:
            return handle(inputs)

        return invoke

    def invoke_with_context(
        inputs: dict[str, JSONValue], tool_call: ToolCall, iteration: int, run: RunScope
    ) -> Any:
        context = ToolCallContext(
            tool_call.id, name, iteration, tool_call.arguments, run.context, run.cancel
        )
        return handle(inputs, context)

    return invoke_with_context


def _field_path(exc: fastjsonschema.JsonSchemaValueException, root: str) -> str:
    path = [str(part) for part in (exc.path or [])[1:]]
    return ".".join([root, *path]) if path else root


def schema_error_message(exc: fastjsonschema.JsonSchemaValueException, root: str) -> str:
    """Turn a validator error into a message that names the offending field."""
    where = _field_path(exc, root)
    text = str(exc.message)
    # fastjsonschema says "data.x must be ..."; restate with our own root name.
    if text.startswith("data"):
        text = text.split(" ", 1)[1] if " " in text else text
    return f"{where} {text}"


def _strip_reserved(schema: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """The model-facing schema: reserved inputs removed from properties and required."""
    stripped = dict(schema)
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and RESERVED_INPUT_KEYS & properties.keys():
        stripped["properties"] = {
            k: v for k, v in properties.items() if k not in RESERVED_INPUT_KEYS
        }
    required = schema.get("required")
    if isinstance(required, list) and RESERVED_INPUT_KEYS.intersection(required):
        stripped["required"] = [k for k in required if k not in RESERVED_INPUT_KEYS]
    return stripped


@attrs.define(slots=True, eq=False)
class ToolSpec:
    """A tool: a namespaced name, schemas, annotations, a timeout, and a handler.

    ``blocking=False`` declares a sync handler cheap enough to run inline on the
    driver's thread (no worker thread, and so no timeout enforcement). ``on_activate``
    runs once per run before the first call; ``on_deactivate`` when the run ends.
    ``takes_context`` (a handler of two parameters) and ``inline`` (a sync handler with
    ``blocking=False``) are read once here, so no call inspects the handler; ``invoke``
    calls the handler in the one shape the runner knows (:data:`Invoke`).
    """

    name: str
    description: str
    input_schema: Mapping[str, JSONValue]
    handler: ToolHandler
    output_schema: Mapping[str, JSONValue] | None = None
    annotations: ToolAnnotations = attrs.field(factory=ToolAnnotations)
    timeout_s: float | None = None
    blocking: bool = True
    kind: ToolKind | None = None
    on_activate: LifecycleHook | None = None
    on_deactivate: LifecycleHook | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)
    validators_on_first_use: bool = attrs.field(default=False, kw_only=True, repr=False)
    """Compile the schemas' validators at the first call instead of now: for the built-in
    tools only, whose schemas are known good (see ``_OnFirstUse``)."""
    schema: ToolSchema = attrs.field(init=False)
    is_async: bool = attrs.field(init=False)
    takes_context: bool = attrs.field(init=False)
    inline: bool = attrs.field(init=False)
    invoke: Invoke = attrs.field(init=False, repr=False)
    _validate_input: CompiledSchema | _OnFirstUse = attrs.field(init=False, repr=False)
    _validate_output: CompiledSchema | _OnFirstUse | None = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME_PATTERN.fullmatch(self.name):
            raise InvalidToolNameError(
                f"invalid tool name {self.name!r}: names match {TOOL_NAME_PATTERN.pattern}"
            )
        self.takes_context = takes_call_context(self.name, self.handler)
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"tool {self.name!r}: timeout_s must be positive")
        self.is_async = is_async_callable(self.handler)
        self.inline = not self.blocking and not self.is_async
        self.invoke = invoker(self.name, self.handler, self.takes_context)
        parameters = _strip_reserved(self.input_schema)
        self.schema = ToolSchema(self.name, self.description, parameters)
        compile_field = _OnFirstUse if self.validators_on_first_use else _compile_field
        self._validate_input = compile_field(parameters, "input_schema")
        self._validate_output = (
            compile_field(self.output_schema, "output_schema")
            if self.output_schema is not None
            else None
        )
        if self.kind is None:
            self.kind = "read" if self.annotations.read_only else "write"

    def validate_input(self, arguments: dict[str, JSONValue]) -> None:
        """Raise ``ToolInputError`` naming the offending field, or saying the check ran
        past its budget (``VALIDATION_BUDGET_S``): the arguments are then refused."""
        try:
            self._validate_input(arguments)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise ToolInputError(
                f"invalid arguments for {self.name}: {schema_error_message(exc, 'arguments')}"
            ) from None
        except ValidationBudgetExceeded as exc:
            raise ToolInputError(
                f"invalid arguments for {self.name}: {_over_budget(exc, 'input')}"
            ) from None

    def validate_output(self, output: JSONValue) -> None:
        """Raise ``ToolOutputError`` naming the offending field, or saying the check ran
        past its budget."""
        if self._validate_output is None:
            return
        try:
            self._validate_output(output)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise ToolOutputError(
                f"invalid output from {self.name}: {schema_error_message(exc, 'output')}"
            ) from None
        except ValidationBudgetExceeded as exc:
            raise ToolOutputError(
                f"invalid output from {self.name}: {_over_budget(exc, 'output')}"
            ) from None

    def release_validators(self) -> None:
        """Drop this spec's validators from the shared cache, so that they go with the
        spec: a tool source that goes away (an MCP server removed) gives their memory
        back at once instead of when the cache would drop them. The spec still works."""
        for validator in (self._validate_input, self._validate_output):
            if isinstance(validator, _OnFirstUse):
                validator = validator.compiled
            if validator is not None:
                _validators.discard(validator)


def _over_budget(exc: ValidationBudgetExceeded, which: str) -> str:
    return (
        f"checking it against the {which} schema took longer than "
        f"{exc.budget_s * 1000:g} ms, the most a check may take, so it is refused"
    )
