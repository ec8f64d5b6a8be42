"""The cleveragents daemon: LSP-framed JSON-RPC over stdio (or TCP) on pygls.

It maps protocol methods to core calls, turns loop events into notifications, and keeps
transcripts. It owns no loop logic of its own.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from pathlib import Path

from ._runs import DaemonConfig, RunManager
from ._server import CleverAgentsServer
from ._transcripts import TranscriptStore, default_state_dir
from ._transport import serve_stdio, serve_tcp

__all__ = [
    "CleverAgentsServer",
    "DaemonConfig",
    "RunManager",
    "TranscriptStore",
    "create_server",
    "default_state_dir",
    "serve",
]


def configure_logging(level: str = "WARNING") -> None:
    """Log to stderr only (stdout is the wire); pygls's own loggers stay at WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.getLevelName(level)))


def create_server(
    state_dir: Path | None = None, model: object = None, automation_profile: str | None = None
) -> CleverAgentsServer:
    from ..workspace import builtin_tools

    config = DaemonConfig(
        state_dir=state_dir or default_state_dir(), model=model,
        automation_profile=automation_profile,
    )  # fmt: skip
    return CleverAgentsServer(config, builtin_tools())


def serve(
    state_dir: Path | None = None,
    tcp: tuple[str, int] | None = None,
    model: object = None,
    automation_profile: str | None = None,
) -> int:
    server = create_server(state_dir, model, automation_profile)
    gc.freeze()  # the long-lived startup objects need never be scanned again
    gc.enable()
    if tcp is not None:
        return asyncio.run(serve_tcp(server, *tcp))
    return asyncio.run(serve_stdio(server))
