"""The core's exception tree, one class per error class, each with its JSON-RPC code.

    CleverAgentsError                 -32010  (base; never raised bare)
    └── ToolError                     -32011  (also a handler's own exception, in records)
        ├── ToolHandlerError          -32011  a handler of neither shape (at ToolSpec(...))
        ├── ToolNotFoundError         -32012  unknown tool name
        ├── DuplicateToolError        -32013  name already registered
        ├── InvalidToolNameError      -32014  name breaks the naming rule
        ├── ToolInputError            -32015  arguments not JSON, or failing the schema
        ├── ToolOutputError           -32016  output fails the output schema
        ├── ToolTimeoutError          -32017  handler exceeded its timeout
        ├── ToolPermissionError       -32018  the permission policy refused the call
        ├── ToolActivationError       -32027  a tool's one-time setup failed
        └── ToolCancelledError        -32030  the run was cancelled before the call finished

Each layer defines its own errors on this base: ``cleveragents.workspace`` (sandbox,
profiles), ``cleveragents.llm.errors`` (model spec, provider), ``cleveragents.daemon``
(runs, capabilities, state dir). A class that sets its own ``code`` is entered in one
registry, :func:`error_classes`, which refuses a code taken twice; the daemon maps every
error to its JSON-RPC reply by ``code``, and the schema and TypeScript generators read
the registry. :class:`JsonRpcCode` holds the protocol's own codes, defined here once.

Tool failures inside a run are not raised to the caller: the runner turns them into
failed ``ToolCallRecord`` entries (``error_code`` is the class's code) fed back to the
model. These classes are raised for bad requests (registration, run parameters).

No class of the tree inherits a built-in exception beside ``Exception``, in any layer (a
test walks them all): an ``except TimeoutError``, ``except PermissionError`` or ``except
OSError`` meant for the standard library's errors cannot catch one of ours and relabel
it, and a handler's own ``TimeoutError`` is never taken for a timeout (the runner tells
a timeout by the deadline that expired). The built-in errors the runtime does raise are
plain ones, as ``docs/runtime.md``'s error table says: ``TypeError`` and ``ValueError``
for a bad argument to a constructor or to ``run_tool_loop`` (an empty prompt).
"""

from __future__ import annotations

import enum
from typing import Any


class JsonRpcCode(enum.IntEnum):
    """The JSON-RPC 2.0 codes every face of cleveragents answers with (and LSP's cancel)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800


_REGISTRY: dict[int, type[CleverAgentsError]] = {}


def error_classes() -> tuple[type[CleverAgentsError], ...]:
    """Every error class with a code of its own, from every package imported so far,
    base first (-32010, -32011, ...)."""
    return tuple(_REGISTRY[code] for code in sorted(_REGISTRY, reverse=True))


def _register(cls: type[CleverAgentsError]) -> None:
    taken = _REGISTRY.get(cls.code)
    if taken is not None and taken.__qualname__ != cls.__qualname__:
        raise TypeError(f"error code {cls.code} of {cls.__qualname__} is {taken.__qualname__}'s")
    _REGISTRY[cls.code] = cls


class CleverAgentsError(Exception):
    """Base of every error this package raises on purpose."""

    code: int = -32010

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            _register(cls)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolError(CleverAgentsError):
    """A tool call failed (the generic code of a handler's own exception)."""

    code = -32011


class ToolNotFoundError(ToolError):
    """No tool of that name is registered."""

    code = -32012


class DuplicateToolError(ToolError):
    """A tool of that name is already registered."""

    code = -32013


class InvalidToolNameError(ToolError):
    """The tool name breaks the naming rule."""

    code = -32014


class ToolInputError(ToolError):
    """The arguments are not a JSON object, or fail the tool's input schema."""

    code = -32015


class ToolOutputError(ToolError):
    """The output fails the tool's output schema."""

    code = -32016


class ToolTimeoutError(ToolError):
    """The handler exceeded its timeout (the runner's deadline expired; a ``TimeoutError``
    the handler raises itself is a failure like any other, with the generic code)."""

    code = -32017


class ToolPermissionError(ToolError):
    """The permission policy refused the call."""

    code = -32018


class ToolActivationError(ToolError):
    """A tool's one-time setup failed."""

    code = -32027


class ToolCancelledError(ToolError):
    """The run was cancelled before the call finished."""

    code = -32030


_register(CleverAgentsError)


class ContextWindowExceededError(CleverAgentsError):
    """The provider refused a request as longer than the model's context window.

    Raised by a model adapter (``cleveragents.llm`` raises a subclass carrying its own
    code); the loop compacts the conversation harder and calls once more, when the run
    has a context budget. Has no code of its own: the adapter's subclass gives it."""
