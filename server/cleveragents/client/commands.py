"""``cleveragents run``: the command line over the client.

``run`` spawns a daemon on the workspace, starts one run and streams it; with ``--json``
each notification is printed as ``{"method": ..., "params": ...}`` exactly as received.
Everything printed passes through ``_terminal``: the model writes much of it, and must
not reach the terminal's escape sequences.
Exit codes (design §10.13): 0 completed, 1 failed or limit, 130 cancelled, 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from ._client import Client
from ._connection import RpcError
from ._terminal import json_text, printable
from .demo import describe

EXIT_CODES = {"completed": 0, "failed": 1, "limit": 1, "cancelled": 130}
EXIT_USAGE = 2


async def _run(args: argparse.Namespace) -> int:
    workspace = Path(args.workspace).resolve()  # noqa: ASYNC240 - once, at start
    if not workspace.is_dir():
        print(
            printable(f"cleveragents run: workspace {workspace} is not a directory"),
            file=sys.stderr,
        )
        return EXIT_USAGE

    def show(method: str, params: dict[str, Any]) -> None:
        if args.json:
            print(json_text({"method": method, "params": params}), flush=True)
        else:
            print(describe(method, params), flush=True)

    params: dict[str, Any] = {}
    if args.model:
        params["model"] = args.model
    if args.profile:
        params["automationProfile"] = args.profile
    if args.max_iterations is not None:
        params["maxIterations"] = args.max_iterations
    async with await Client.spawn(workspace, state_dir=args.state_dir) as client:
        run = asyncio.ensure_future(client.run(args.prompt, on_event=show, **params))
        try:
            result = await run
        except RpcError as exc:
            print(printable(f"cleveragents run: {exc.message}"), file=sys.stderr)
            return EXIT_USAGE
        except asyncio.CancelledError:
            return EXIT_CODES["cancelled"]
    if not args.json:
        print(printable(result["content"]))
        if result.get("error"):
            print(printable(f"error: {result['error']['message']}"), file=sys.stderr)
    return EXIT_CODES.get(result["status"], 1)


def run_command(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return EXIT_CODES["cancelled"]
