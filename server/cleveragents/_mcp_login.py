"""``cleveragents mcp login NAME`` and ``logout NAME``, and the terminal's browser step.

``login`` forgets the stored tokens of a URL server of ``config.toml`` (or an approved
``.mcp.json``), connects to it in this process and signs in: the sign-in page opens in
the system's browser when there is one, and its URL is printed either way; it returns
once the server is ready (or failed, or the sign-in was not completed in time).
``logout`` deletes what is stored for the server (tokens and client registration).
Both keep tokens where the daemon does: ``STATE_DIR/mcp-auth/NAME.json`` (0600).
:func:`open_sign_in` is the same browser step for ``cleveragents run`` and ``chat``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

LOGIN_TIMEOUT_S = 11 * 60.0
"""A bound past the sign-in's own (10 minutes), so login always ends."""


def open_sign_in(server: Any) -> None:
    """Show a server's sign-in URL on stderr, and open it in the browser when there is
    one (``server`` is an ``McpServer`` waiting in ``needsAuth``)."""
    from .client._terminal import open_in_browser, printable

    url = server.authorization_url
    if url is None:
        return
    opened = open_in_browser(url)
    verb = "Opening your browser to sign in to" if opened else "To sign in to"
    print(
        printable(f"cleveragents: {verb} MCP server {server.config.name}, open: ") + url,
        file=sys.stderr,
        flush=True,
    )


def _entry(args: argparse.Namespace) -> Any:
    from ._mcp_commands import McpUsageError, _workspace, gather

    user, theirs = gather(_workspace(args.workspace))
    for entry in (*user, *theirs):
        if entry.name == args.name:
            if entry.config.url is None:
                raise McpUsageError(
                    f"{args.name} is a stdio server ({entry.source}): there is nothing to sign "
                    "in to"
                )
            return entry
    raise McpUsageError(f"no MCP server named {args.name!r} (see: cleveragents mcp list)")


def login_command(args: argparse.Namespace) -> int:
    from ._mcp_commands import McpUsageError, _state_dir

    try:
        entry = _entry(args)
        state = _state_dir(args.state_dir)
    except McpUsageError as exc:
        print(f"cleveragents mcp login: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_login(entry.config, state))


async def _login(config: Any, state: Path) -> int:
    from .mcp import McpServer, TokenStore

    tokens = TokenStore(state)
    tokens.forget_tokens(config.name, config.url)
    server = McpServer(
        config, scope="daemon", log_dir=state / "mcp", base_env={}, tokens=tokens,
        on_authorize=open_sign_in,
    )  # fmt: skip
    server.start()
    try:
        async with asyncio.timeout(LOGIN_TIMEOUT_S):
            while server.status in ("starting", "needsAuth"):  # noqa: ASYNC110 - no event for it
                await asyncio.sleep(0.1)
    except TimeoutError:
        pass
    finally:
        status, error = server.status, server.error
        await server.stop()
    if status == "ready":
        print(f"signed in to {config.name}; its tokens are kept in {state / 'mcp-auth'}")
        return 0
    print(f"cleveragents mcp login: {config.name}: {error or status}", file=sys.stderr)
    return 1


def logout_command(args: argparse.Namespace) -> int:
    from ._mcp_commands import McpUsageError, _state_dir
    from .mcp import TokenStore

    try:
        state = _state_dir(args.state_dir)
    except McpUsageError as exc:
        print(f"cleveragents mcp logout: {exc}", file=sys.stderr)
        return 2
    if TokenStore(state).forget(args.name):
        print(f"forgot the tokens and registration of {args.name}")
    else:
        print(f"nothing was stored for {args.name}")
    return 0
