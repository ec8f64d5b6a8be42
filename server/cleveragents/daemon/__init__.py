"""The cleveragents daemon: LSP-framed JSON-RPC over stdio (or TCP) on pygls.

It maps protocol methods to core calls, turns loop events into notifications, and keeps
transcripts (through :mod:`cleveragents.transcripts`). It owns no loop logic of its own.
"""

from ..transcripts import (
    RunInterruptedError,
    RunNotFoundError,
    RunStateError,
    TranscriptStore,
    default_state_dir,
)
from ._config import DaemonConfig
from ._errors import CapabilityError, NotInitializedError, StateDirError
from ._runs import RunManager
from ._serve import create_server, serve
from ._server import CleverAgentsServer

__all__ = [
    "CapabilityError",
    "CleverAgentsServer",
    "DaemonConfig",
    "NotInitializedError",
    "RunInterruptedError",
    "RunManager",
    "RunNotFoundError",
    "RunStateError",
    "StateDirError",
    "TranscriptStore",
    "create_server",
    "default_state_dir",
    "serve",
]
