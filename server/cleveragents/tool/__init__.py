"""The core tool-calling runtime of cleveragents.

Owns tool specs, the registry, the four-stage runner, the provider router, the loop
(sync and async), the context and the records. It deliberately knows no transport, no
provider SDK, no wire types and no files: the daemon, the adapters and the workspace
tools stand on it, never the other way round.
"""

from ._cancel import CancelToken
from ._codec import ProviderFormat, ProviderStreamError
from ._errors import (
    CleverAgentsError,
    DuplicateToolError,
    InvalidToolNameError,
    JsonRpcCode,
    ToolActivationError,
    ToolCancelledError,
    ToolError,
    ToolInputError,
    ToolNotFoundError,
    ToolOutputError,
    ToolPermissionError,
    ToolTimeoutError,
    error_classes,
)
from ._events import EventSink, IterationSummary, NullEventSink
from ._policy import (
    PERMISSION_OUTCOMES,
    AllowAll,
    Decision,
    PermissionOutcome,
    PermissionQuery,
    ToolPolicy,
)
from ._registry import ToolRegistry
from ._router import ToolCallRouter, register_codec
from ._runner import StageObserver, ToolRunner, output_text
from ._runtime import DEFAULT_MAX_ITERATIONS, ToolCallingRuntime
from ._spec import (
    TOOL_NAME_PATTERN,
    SchemaDefinitionError,
    ToolAnnotations,
    ToolHandler,
    ToolHandlerError,
    ToolKind,
    ToolSpec,
)
from ._types import (
    RESERVED_INPUT_KEYS,
    JSONValue,
    LLMCaller,
    LLMRequest,
    LLMResponse,
    Message,
    ToolActorContext,
    ToolCall,
    ToolCallContext,
    ToolCallRecord,
    ToolCallRunResult,
    ToolSchema,
    Usage,
)

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "PERMISSION_OUTCOMES",
    "RESERVED_INPUT_KEYS",
    "TOOL_NAME_PATTERN",
    "AllowAll",
    "CancelToken",
    "CleverAgentsError",
    "Decision",
    "DuplicateToolError",
    "EventSink",
    "InvalidToolNameError",
    "IterationSummary",
    "JSONValue",
    "JsonRpcCode",
    "LLMCaller",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "NullEventSink",
    "PermissionOutcome",
    "PermissionQuery",
    "ProviderFormat",
    "ProviderStreamError",
    "SchemaDefinitionError",
    "StageObserver",
    "ToolActivationError",
    "ToolActorContext",
    "ToolAnnotations",
    "ToolCall",
    "ToolCallContext",
    "ToolCallRecord",
    "ToolCallRouter",
    "ToolCallRunResult",
    "ToolCallingRuntime",
    "ToolCancelledError",
    "ToolError",
    "ToolHandler",
    "ToolHandlerError",
    "ToolInputError",
    "ToolKind",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolPermissionError",
    "ToolPolicy",
    "ToolRegistry",
    "ToolRunner",
    "ToolSchema",
    "ToolSpec",
    "ToolTimeoutError",
    "Usage",
    "error_classes",
    "output_text",
    "register_codec",
]
