"""What both JSON-RPC faces (the LSP daemon and the ACP agent) share: the guarded
dispatcher (strict JSON, ids, cancels, requests to the peer), the one error boundary
(:func:`to_rpc_error`), the process plumbing (stdio, the write buffer, TCP keepalive,
signals, exit codes, :func:`prepare_process`), the ``Peer`` a face's runs talk to, and
MCP entries as both receive them.

It stands on the protocol (framing, ``RpcError``) and the run service; it knows no
method of either face.
"""

from ..protocol import RpcError
from ..runs import prepare_process
from ._dispatch import (
    CANCEL_REQUEST,
    MAX_DEPTH,
    Dispatcher,
    FrameSink,
    Handlers,
    NotificationHandler,
    RequestHandler,
)
from ._errors import NotInitializedError, to_rpc_error
from ._mcp_entries import to_configs
from ._peer import CurrentPeer, Peer, call_peer
from ._transport import (
    EXIT_CODES,
    HIGH_WATER,
    LOW_WATER,
    StreamSink,
    install_signals,
    keepalive,
    open_stdio,
)

__all__ = [
    "CANCEL_REQUEST",
    "EXIT_CODES",
    "HIGH_WATER",
    "LOW_WATER",
    "MAX_DEPTH",
    "CurrentPeer",
    "Dispatcher",
    "FrameSink",
    "Handlers",
    "NotInitializedError",
    "NotificationHandler",
    "Peer",
    "RequestHandler",
    "RpcError",
    "StreamSink",
    "call_peer",
    "install_signals",
    "keepalive",
    "open_stdio",
    "prepare_process",
    "to_configs",
    "to_rpc_error",
]
