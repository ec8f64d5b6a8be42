"""The ``cleveragents`` command: ``serve`` (the daemon), ``run``, ``demo`` and ``runs``.

``serve`` imports only the daemon; the client-side commands import only the client, so
each starts as fast as it can.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_USAGE = 2


def _tcp(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError("expected HOST:PORT, for example 127.0.0.1:7000")
    return host or "127.0.0.1", int(port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cleveragents",
        description="A tool-calling runtime for LLM actors: serve the daemon, run a prompt, "
        "run the demo, or look at past runs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the daemon (JSON-RPC with LSP framing on stdio)")
    serve.add_argument("--tcp", type=_tcp, metavar="HOST:PORT", help="listen on TCP instead")
    serve.add_argument(
        "--token-file", type=Path, metavar="PATH",
        help="--tcp access token (created 0600 if missing; default $CLEVERAGENTS_TOKEN, "
        "else STATE_DIR/tcp-token)",
    )  # fmt: skip
    serve.add_argument("--state-dir", type=Path, help="where transcripts go")
    serve.add_argument("--model", help="default model spec, e.g. scripted:turns.json")
    serve.add_argument("--profile", help="default automation profile (default: supervised)")
    serve.add_argument("--log-level", default="WARNING", help="stderr log level")

    run = sub.add_parser("run", help="start one run on a spawned daemon and stream it")
    run.add_argument("prompt")
    run.add_argument("--model", help="model spec (else $CLEVERAGENTS_MODEL)")
    run.add_argument("--workspace", type=Path, default=Path.cwd(), help="sandbox root")
    run.add_argument("--profile", help="automation profile")
    run.add_argument("--max-iterations", type=int)
    run.add_argument("--state-dir", type=Path)
    run.add_argument("--json", action="store_true", help="print each notification as JSON")

    demo = sub.add_parser("demo", help="a scripted run on a sample workspace, through the daemon")
    demo.add_argument("--workspace", type=Path, help="use this folder instead of a temp copy")

    runs = sub.add_parser("runs", help="list or show persisted runs")
    runs_sub = runs.add_subparsers(dest="runs_command", required=True)
    runs_sub.add_parser("list", help="list runs").add_argument("--state-dir", type=Path)
    show = runs_sub.add_parser("show", help="show one run's result")
    show.add_argument("run_id")
    show.add_argument("--state-dir", type=Path)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and EXIT_USAGE
    if args.command == "serve":
        # Importing lsprotocol grows the heap enough to trigger a full collection that
        # costs ~45 ms of startup; collect nothing until the server is built (then
        # ``serve`` freezes what exists and turns the collector back on).
        gc.disable()
        from .daemon import configure_logging, serve

        configure_logging(args.log_level.upper())
        code: int = serve(
            args.state_dir, args.tcp, args.model, args.profile, token_file=args.token_file
        )
        return code
    if args.command == "demo":
        from .client.demo import run_demo

        return run_demo(args.workspace)
    if args.command == "run":
        from .client.commands import run_command

        return run_command(args)
    return runs_command(args)


def runs_command(args: argparse.Namespace) -> int:
    """Read transcripts directly: no daemon needed to look at past runs. What a model
    wrote is in them, so it is printed as ``run`` prints it (see ``client._terminal``)."""
    from .client._terminal import json_text, printable
    from .daemon import TranscriptStore, default_state_dir
    from .tool import RunNotFoundError

    store = TranscriptStore(args.state_dir or default_state_dir())
    if args.runs_command == "list":
        for summary in store.summaries():
            print(
                printable(
                    f"{summary['runId']}  {summary['status']:<9}  {summary['startedAt']}  "
                    f"{summary['iterations']} it  {summary['toolCallCount']} calls  "
                    f"{summary['prompt'][:50]}"
                )
            )
        return 0
    try:
        result = store.result(args.run_id)
    except RunNotFoundError as exc:
        print(printable(f"cleveragents runs show: {exc.message}"), file=sys.stderr)
        return 1
    print(json_text({"method": "run/get", "result": result}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
