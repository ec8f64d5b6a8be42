"""The Agent Client Protocol face of the daemon: ``cleveragents serve --protocol acp``.

ACP v1 on stdio (newline-delimited JSON-RPC) over the run service
(:mod:`cleveragents.runs`: the same built-in tools, sandbox pinning, automation
profiles, models, MCP servers, output cap and transcripts as the LSP daemon): each
``session/prompt`` is one run of it. The JSON-RPC guard is the shared dispatcher
(:mod:`cleveragents.rpc`), on lines instead of ``Content-Length`` frames.

* ``_rpc``: lines, the dispatcher subclass, ``$/cancel_request``;
* ``_transport``: stdio and the endings;
* ``_agent``: the method table, sessions, settings, prompts;
* ``_params``: directories and ``mcpServers`` read from params;
* ``_session``: one session, its run events turned into ``session/update``, permissions;
* ``_mapping``: titles, kinds, locations, content, prompt blocks, stop reasons (pure);
* ``_store``: sessions on disk (``STATE_DIR/acp``).

The core knows nothing of this package; only the command line imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import pathlib
import typing

from ._agent import AcpAgent

if typing.TYPE_CHECKING:
    from collections.abc import Sequence

    from ..mcp import McpServerConfig

__all__ = ["AcpAgent", "create_agent", "serve"]


def create_agent(
    state_dir: pathlib.Path | None = None,
    model: object = None,
    automation_profile: str | None = None,
    mcp_servers: Sequence[McpServerConfig] = (),
    *,
    instructions: bool = True,
    checkpoints: bool = True,
) -> AcpAgent:
    """The agent and its run service; ``mcp_servers`` start with the service (so call it
    on a running loop when there are any) and serve every session, beside each
    session's own."""
    from ..runs import RunSettings
    from ..transcripts import default_state_dir
    from ..workspace import ShellTool, builtin_tools

    if isinstance(model, str) and model.lstrip().startswith("{"):
        # ``--model '{"provider": "scripted", "script": [...]}'``: an object spec inline.
        with contextlib.suppress(ValueError):  # not JSON: refused as a spec at the first turn
            model = json.loads(model)
    settings = RunSettings(
        state_dir=state_dir or default_state_dir(), model=model,
        automation_profile=automation_profile, mcp_servers=tuple(mcp_servers),
        instructions=instructions, checkpoints=checkpoints,
    )  # fmt: skip
    return AcpAgent(settings, builtin_tools(shell=ShellTool()))


def serve(
    state_dir: pathlib.Path | None = None,
    model: object = None,
    automation_profile: str | None = None,
    mcp_servers: Sequence[McpServerConfig] = (),
    *,
    instructions: bool = True,
    checkpoints: bool = True,
) -> int:
    """Serve ACP on stdio until the client leaves; returns the process exit code."""
    from ..rpc import prepare_process
    from ._transport import serve_stdio

    agent = create_agent(
        state_dir, model, automation_profile, instructions=instructions, checkpoints=checkpoints
    )
    prepare_process()  # the collector policy included, as for the LSP daemon

    async def serving() -> int:
        if mcp_servers:  # config.toml's: started on the loop that serves them
            agent.service.mcp.start(list(mcp_servers))
        return await serve_stdio(agent)

    try:
        return asyncio.run(serving())
    except KeyboardInterrupt:
        logging.getLogger(__name__).warning("interrupted")
        return 130
