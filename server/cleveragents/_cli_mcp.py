"""``cleveragents mcp``: the MCP servers the command line starts, and where each comes
from.

``list`` shows every server a run here would know (``config.toml``'s
``[mcp_servers.NAME]`` tables, the workspace's ``.mcp.json`` and whether each of its
servers is approved); ``add`` and ``remove`` edit ``config.toml``'s tables; ``approve``
and ``revoke`` record the user's decision on a workspace's ``.mcp.json`` servers (a
repository's choice, never started unapproved). Other sub-commands (``login``,
``logout``) register themselves the same way: a ``(name, help, build, handler)`` row in
:data:`SUBCOMMANDS`.

Only ``argparse`` is imported at the top: building the parser costs nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

Handler = Callable[[argparse.Namespace], int]
SUBCOMMANDS: list[tuple[str, str, Callable[[Any], None], str]] = []
"""``(name, help, add_arguments(parser), "module:function")``: each sub-command of
``cleveragents mcp``; the handler is imported only when the sub-command runs."""


def add_parser(sub: Any) -> None:
    """``cleveragents mcp`` and its sub-commands, into the top-level sub-parsers."""
    mcp = sub.add_parser(
        "mcp", help="the MCP servers runs start here: list, add, remove, approve, revoke, "
        "login, logout",
        description="The MCP servers the command line starts: config.toml's [mcp_servers.NAME] "
        "tables (add, remove), and the workspace's .mcp.json, whose servers start only once "
        "you approve them (approve, revoke). docs/mcp.md says more.",
    )  # fmt: skip
    mcp.set_defaults(print_help=mcp.print_help)
    names = ",".join(name for name, *_ in SUBCOMMANDS)
    mcp_sub = mcp.add_subparsers(dest="mcp_command", metavar="{" + names + "}")
    for name, about, build, _ in SUBCOMMANDS:
        build(mcp_sub.add_parser(name, help=about))


def mcp_command(args: argparse.Namespace) -> int:
    """Run the chosen sub-command (its handler imported now)."""
    import importlib

    for name, _, _, target in SUBCOMMANDS:
        if name == args.mcp_command:
            module, _, function = target.partition(":")
            handler: Handler = getattr(importlib.import_module(module), function)
            return handler(args)
    raise AssertionError(f"no handler for mcp {args.mcp_command}")


def _workspace_flag(parser: Any) -> None:
    from pathlib import Path

    parser.add_argument(
        "--workspace", type=Path, metavar="DIR",
        help="the workspace whose .mcp.json is meant (default: the current directory)",
    )  # fmt: skip


def _build_list(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="the servers as JSON")
    _workspace_flag(parser)
    parser.add_argument("--state-dir", type=Path, metavar="DIR", help="where approvals are kept")


def _build_add(parser: Any) -> None:
    parser.add_argument("name", metavar="NAME", help="the server's name (letters, digits, _ and -)")
    parser.add_argument(
        "server_command", nargs="*", metavar="-- COMMAND [ARGS...]",
        help="a stdio server's command and arguments, after --",
    )  # fmt: skip
    parser.add_argument("--url", help="a streamable HTTP server's URL (instead of a command)")
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE",
        help="a variable set for a stdio server (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE",
        help="an HTTP header sent to a url server (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--bearer-token-env-var", metavar="VAR",
        help="send 'Authorization: Bearer $VAR' to a url server (the token stays in VAR)",
    )  # fmt: skip
    parser.add_argument("--replace", action="store_true", help="replace a server of that name")


def _build_remove(parser: Any) -> None:
    parser.add_argument("name", metavar="NAME", help="a server of config.toml's")


def _build_approve(parser: Any) -> None:
    parser.add_argument(
        "names", nargs="*", metavar="NAME",
        help="the .mcp.json servers to approve (default: ask about each new one)",
    )  # fmt: skip
    parser.add_argument("--all", action="store_true", help="approve every server it lists")
    _workspace_flag(parser)
    parser.add_argument("--state-dir", type=Path, metavar="DIR", help="where approvals are kept")


def _build_revoke(parser: Any) -> None:
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help="the servers to forget (default: all)"
    )
    _workspace_flag(parser)
    parser.add_argument("--state-dir", type=Path, metavar="DIR", help="where approvals are kept")


SUBCOMMANDS += [
    ("list", "every MCP server a run here would start, and where each comes from",
     _build_list, "cleveragents._mcp_commands:list_command"),
    ("add", "add a [mcp_servers.NAME] table to config.toml",
     _build_add, "cleveragents._mcp_commands:add_command"),
    ("remove", "remove a [mcp_servers.NAME] table from config.toml",
     _build_remove, "cleveragents._mcp_commands:remove_command"),
    ("approve", "let runs start this workspace's .mcp.json servers (as they are now)",
     _build_approve, "cleveragents._mcp_commands:approve_command"),
    ("revoke", "forget approvals of this workspace's .mcp.json servers",
     _build_revoke, "cleveragents._mcp_commands:revoke_command"),
]  # fmt: skip


def _build_login(parser: Any) -> None:
    parser.add_argument("name", metavar="NAME", help="a url server of config.toml (or .mcp.json)")
    _workspace_flag(parser)
    parser.add_argument("--state-dir", type=Path, metavar="DIR", help="where tokens are kept")


def _build_logout(parser: Any) -> None:
    parser.add_argument("name", metavar="NAME", help="the server whose tokens to forget")
    parser.add_argument("--state-dir", type=Path, metavar="DIR", help="where tokens are kept")


SUBCOMMANDS += [
    ("login", "sign in to a url server (OAuth): opens the browser, keeps the tokens",
     _build_login, "cleveragents._mcp_login:login_command"),
    ("logout", "forget a server's OAuth tokens and client registration",
     _build_logout, "cleveragents._mcp_login:logout_command"),
]  # fmt: skip


def take_extras(args: argparse.Namespace, extras: list[str]) -> list[str]:
    """``mcp add NAME --env A=1 -- COMMAND ARGS``: argparse leaves what follows ``--`` over
    once options came between the name and it; it is the server's command. The extras
    nobody takes are returned (an error, as argparse would give)."""
    if getattr(args, "mcp_command", None) == "add" and extras[:1] == ["--"]:
        args.server_command = [*args.server_command, *extras[1:]]
        return []
    return extras
