"""The model layer's errors, on the core's base (see ``cleveragents.tool``'s tree).

    CleverAgentsError                 -32010  (cleveragents.tool)
    ├── ModelConfigError              -32020  no model, or a malformed model spec
    └── ModelProviderError            -32021  the provider failed (HTTP, auth, overflow)
        └── ContextOverflowError          -32021  the request passed the context window

``ModelConfigError`` is raised before a run starts (a spec, a missing key or SDK extra);
``ModelProviderError`` ends a run as failed, with a message that never holds a key.
Neither inherits a built-in exception, so no ``except ValueError`` (or other built-in)
can catch and relabel one: catch them by class, or ``CleverAgentsError``.
"""

from __future__ import annotations

from cleveragents.tool import CleverAgentsError, ContextWindowExceededError

__all__ = ["ContextOverflowError", "ModelConfigError", "ModelProviderError"]


class ModelConfigError(CleverAgentsError):
    """No model, a malformed model spec, a missing key, script file or SDK extra."""

    code = -32020


class ModelProviderError(CleverAgentsError):
    """The provider failed (HTTP, auth, context overflow), or the client's model did."""

    code = -32021


class ContextOverflowError(ModelProviderError, ContextWindowExceededError):
    """The provider refused the request as longer than the model's context window: a
    run with a context budget compacts and calls once more before it fails."""
