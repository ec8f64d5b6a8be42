"""The cleveragents exception tree, one class per error class, each with its JSON-RPC code.

    CleverAgentsError                 -32010  (base; never raised bare)
    ├── ToolError                     -32011
    │   ├── ToolNotFoundError         -32012  unknown tool name
    │   ├── DuplicateToolError        -32013  name already registered
    │   ├── InvalidToolNameError      -32014  name breaks the naming rule
    │   ├── ToolInputError            -32015  arguments fail the input schema
    │   ├── ToolOutputError           -32016  output fails the output schema
    │   ├── ToolTimeoutError          -32017  handler exceeded its timeout
    │   ├── ToolPermissionError       -32018  the automation profile refused the call
    │   ├── ToolActivationError       -32027  a tool's one-time setup failed
    │   └── ToolCancelledError        -32030  the run was cancelled before the call finished
    ├── SandboxViolationError         -32019  a path outside the sandbox root
    ├── ModelConfigError              -32020  no model, or a malformed model spec
    ├── ModelProviderError            -32021  the provider failed (HTTP, auth, overflow)
    ├── RunNotFoundError              -32022  unknown run id
    ├── RunStateError                 -32023  a run id already in use, or a run in the wrong state
    ├── ProfileError                  -32024  unknown automation profile
    ├── CapabilityError               -32025  the client did not declare a needed capability
    ├── NotInitializedError           -32026  a request before ``initialize``
    ├── RunInterruptedError           -32028  the daemon stopped before the run ended
    └── StateDirError                 -32029  the state dir cannot be written

Tool failures inside a run are not raised to the caller: the runner turns them into
failed ``ToolCallRecord`` entries fed back to the model. These classes are raised for
bad requests (registration, run parameters) and used to build the record's message.
The daemon maps the tree to JSON-RPC errors in one place, by ``code``.
"""

from __future__ import annotations


class CleverAgentsError(Exception):
    """Base of every error this package raises on purpose."""

    code: int = -32010

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolError(CleverAgentsError):
    code = -32011


class ToolNotFoundError(ToolError, KeyError):
    code = -32012

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.message


class DuplicateToolError(ToolError):
    code = -32013


class InvalidToolNameError(ToolError, ValueError):
    code = -32014


class ToolInputError(ToolError, ValueError):
    code = -32015


class ToolOutputError(ToolError):
    code = -32016


class ToolTimeoutError(ToolError, TimeoutError):
    code = -32017


class ToolPermissionError(ToolError, PermissionError):
    code = -32018


class ToolActivationError(ToolError):
    code = -32027


class ToolCancelledError(ToolError):
    code = -32030


class SandboxViolationError(CleverAgentsError, PermissionError):
    code = -32019


class ModelConfigError(CleverAgentsError, ValueError):
    code = -32020


class ModelProviderError(CleverAgentsError):
    code = -32021


class RunNotFoundError(CleverAgentsError, KeyError):
    code = -32022

    def __str__(self) -> str:
        return self.message


class RunStateError(CleverAgentsError):
    code = -32023


class ProfileError(CleverAgentsError, ValueError):
    code = -32024


class CapabilityError(CleverAgentsError):
    code = -32025


class NotInitializedError(CleverAgentsError):
    code = -32026


class RunInterruptedError(CleverAgentsError):
    code = -32028


class StateDirError(CleverAgentsError):
    code = -32029


ALL_ERRORS: tuple[type[CleverAgentsError], ...] = (
    CleverAgentsError,
    ToolError,
    ToolNotFoundError,
    DuplicateToolError,
    InvalidToolNameError,
    ToolInputError,
    ToolOutputError,
    ToolTimeoutError,
    ToolPermissionError,
    ToolActivationError,
    SandboxViolationError,
    ModelConfigError,
    ModelProviderError,
    RunNotFoundError,
    RunStateError,
    ProfileError,
    CapabilityError,
    NotInitializedError,
    RunInterruptedError,
    StateDirError,
)
