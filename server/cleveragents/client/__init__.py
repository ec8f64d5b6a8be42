"""The Python client: spawn the daemon, register tools, run, stream events.

It speaks the wire protocol through ``cleveragents.protocol``'s method names only; it
imports neither pygls nor the daemon.
"""

from ..protocol import RpcError
from ._client import Client
from ._connection import DaemonConnection
from ._stderr import DaemonStartError

__all__ = ["Client", "DaemonConnection", "DaemonStartError", "RpcError"]
