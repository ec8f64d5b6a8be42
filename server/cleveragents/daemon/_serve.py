"""The daemon as a process: build the server with the built-in tools, then serve one
client over stdio or TCP until it leaves, and say how it ended (the exit codes of
``docs/daemon.md``)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from ..mcp import McpServerConfig
from ..rpc import prepare_process
from ..transcripts import default_state_dir
from ._config import DaemonConfig
from ._server import CleverAgentsServer
from ._tcp_gate import TokenError
from ._transport import load_token, serve_stdio, serve_tcp


def create_server(
    state_dir: Path | None = None,
    model: object = None,
    automation_profile: str | None = None,
    *,
    checkpoints: bool = True,
) -> CleverAgentsServer:
    from ..workspace import ShellTool, builtin_tools

    config = DaemonConfig(
        state_dir=state_dir or default_state_dir(), model=model,
        automation_profile=automation_profile, checkpoints=checkpoints,
    )  # fmt: skip
    shell = ShellTool()
    server = CleverAgentsServer(config, builtin_tools(shell=shell))
    server.on_shell_env = shell.set_pass_env
    return server


def serve(
    state_dir: Path | None = None,
    tcp: tuple[str, int] | None = None,
    model: object = None,
    automation_profile: str | None = None,
    *,
    token_file: Path | None = None,
    mcp_servers: Sequence[McpServerConfig] = (),
    checkpoints: bool = True,
    instructions: bool = True,
) -> int:
    """Run the daemon until its client leaves; returns the process exit code (0 after
    shutdown, 1 on exit without it, 2 for a ``--tcp`` token that cannot be used,
    143/129/130 on SIGTERM/SIGHUP/SIGINT)."""
    server = create_server(state_dir, model, automation_profile, checkpoints=checkpoints)
    if mcp_servers:  # config.toml's, read by the command line
        server.config = attrs.evolve(server.config, mcp_servers=tuple(mcp_servers))
    if not instructions:  # serve --no-instructions
        server.config = attrs.evolve(server.config, instructions=False)
    prepare_process()
    try:
        if tcp is not None:
            try:
                token = load_token(token_file, server.config.state_dir)
            except TokenError as exc:
                print(f"cleveragents serve: {exc}", file=sys.stderr)
                return 2
            return asyncio.run(serve_tcp(server, *tcp, token))
        return asyncio.run(serve_stdio(server))
    except KeyboardInterrupt:  # SIGINT before the loop's own handler was installed
        logging.getLogger(__name__).warning("interrupted")
        return 130
