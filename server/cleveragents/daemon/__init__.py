"""The cleveragents daemon: LSP-framed JSON-RPC over stdio (or TCP) on pygls.

It maps protocol methods to the run service (:mod:`cleveragents.runs`) and its typed
run events to notifications. It owns no run and no loop logic of its own.
"""

from ..rpc import NotInitializedError
from ..runs import CapabilityError, StateDirError
from ..transcripts import (
    RunInterruptedError,
    RunNotFoundError,
    RunStateError,
    TranscriptStore,
    default_state_dir,
)
from ._config import DaemonConfig
from ._runs import DaemonRuns
from ._serve import create_server, serve
from ._server import CleverAgentsServer

__all__ = [
    "CapabilityError",
    "CleverAgentsServer",
    "DaemonConfig",
    "DaemonRuns",
    "NotInitializedError",
    "RunInterruptedError",
    "RunNotFoundError",
    "RunStateError",
    "StateDirError",
    "TranscriptStore",
    "create_server",
    "default_state_dir",
    "serve",
]
