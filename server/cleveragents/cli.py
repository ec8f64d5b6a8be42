"""The ``cleveragents`` command: ``serve`` (the daemon), ``run``, ``demo``, ``runs`` and
``config``.

This module parses arguments and turns them into what the client-side commands take:
it resolves settings (flag, then environment, then ``config.toml``), checks the model
spec, the profile and the workspace, reads the prompt, and finds the run to continue.
Every usage error names the flag and exits 2. It is the one place that may reach into
the transcript store and the workspace's profile table (the client layer may not);
each import happens inside the command that needs it, so ``serve`` loads only the
daemon, ``runs`` never loads it, and ``run`` never loads rich unless it draws the live
view.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_USAGE = 2


class UsageError(Exception):
    """A bad argument or setting: printed as ``cleveragents CMD: MESSAGE``, exit 2."""


def _tcp(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError("expected HOST:PORT, for example 127.0.0.1:7000")
    return host or "127.0.0.1", int(port)


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _profiles_help() -> str:
    from .workspace.profiles import BUILTIN_PROFILES, DEFAULT_PROFILE

    lines = ["automation profiles (--profile; what each does with read / write / execute tools):"]
    for name, profile in BUILTIN_PROFILES.items():
        marks = f"{profile.read}/{profile.write}/{profile.execute}"
        default = " (default)" if name == DEFAULT_PROFILE else ""
        lines.append(f"  {name:<11} {marks:<18} {profile.description}{default}")
    lines += [
        "'ask' prompts on a terminal ([y]es / [n]o / [a]lways); --yes allows it unasked;",
        "off a terminal without --yes it is refused.",
    ]
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """Builds its epilog only when help is shown: the profile table imports the
    workspace package (~90 ms), which ``serve`` must not pay before its own setup."""

    def __init__(self, *args: Any, epilog_factory: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.epilog_factory = epilog_factory

    def format_help(self) -> str:
        if self.epilog is None and self.epilog_factory is not None:
            self.epilog = self.epilog_factory()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="cleveragents",
        description="A tool-calling runtime for LLM actors: run a prompt, run the demo, look "
        "at past runs, or serve the daemon to an editor.",
    )
    parser.add_argument("--version", action="version", version=f"cleveragents {__version__}")
    parser.set_defaults(print_help=parser.print_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser(
        "run", help="run a prompt on the workspace and show it live",
        description="Run a prompt on a daemon spawned for the workspace, and show the run "
        "as it happens.", epilog_factory=_profiles_help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    run.add_argument(
        "words", nargs="*", metavar="[RUN_ID] PROMPT",
        help="the prompt ('-', or none with a pipe on stdin: read stdin); with --continue, "
        "an optional run id first",
    )  # fmt: skip
    run.add_argument(
        "-m", "--model", metavar="SPEC",
        help="a spec (openai:gpt-4o-mini, anthropic:MODEL, scripted:FILE), an inline JSON "
        "object ({\"provider\": \"openai\", \"model\": ..., \"baseUrl\": ...}) or @FILE "
        "holding either; else $CLEVERAGENTS_MODEL, else config.toml",
    )  # fmt: skip
    run.add_argument("--system", metavar="TEXT", help="the system prompt")
    run.add_argument(
        "--workspace", type=Path, metavar="DIR",
        help="the sandbox root (default: the current directory, unless it is / or your home)",
    )  # fmt: skip
    run.add_argument("--max-iterations", type=_positive, metavar="N", help="default 25")
    run.add_argument("--profile", metavar="NAME", help="automation profile (listed below)")
    run.add_argument("-y", "--yes", action="store_true", help="allow what the profile would ask")
    run.add_argument("--json", action="store_true", help="print each notification as JSON")
    run.add_argument("--state-dir", type=Path, metavar="DIR", help="where transcripts go")
    run.add_argument(
        "--continue", dest="continue_", action="store_true",
        help="continue the latest run in this workspace, or RUN_ID",
    )  # fmt: skip

    demo = sub.add_parser("demo", help="a scripted run on a sample project: no key, no network")
    demo.add_argument("--workspace", type=Path, help="use this folder instead of a temp copy")
    demo.add_argument("--state-dir", type=Path, metavar="DIR", help="where its transcript goes")
    demo.add_argument(
        "--protocol", choices=("lsp", "acp"), default="lsp",
        help="lsp: our protocol (default); acp: play an editor speaking the Agent Client Protocol",
    )  # fmt: skip

    runs = sub.add_parser("runs", help="list or show past runs")
    runs.set_defaults(print_help=runs.print_help)
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="{list,show}")
    listing = runs_sub.add_parser("list", help="the runs, newest first")
    listing.add_argument("--limit", type=_positive, default=20, metavar="N", help="default 20")
    listing.add_argument("--json", action="store_true", help="the RunSummary list as JSON")
    listing.add_argument("--state-dir", type=Path, metavar="DIR")
    show = runs_sub.add_parser("show", help="one run: status, content, tool calls")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="the RunResult as JSON")
    show.add_argument("--state-dir", type=Path, metavar="DIR")

    config = sub.add_parser("config", help="the effective settings and where each comes from")
    config.add_argument("--json", action="store_true")

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
    serve.add_argument(
        "--protocol", choices=("lsp", "acp"), default="lsp",
        help="lsp: our protocol, LSP-framed (default); acp: the Agent Client Protocol",
    )  # fmt: skip
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
        from .daemon import serve

        _configure_logging(args.log_level.upper())
        if args.protocol == "acp":
            if args.tcp is not None:
                print("cleveragents serve: --protocol acp speaks on stdio only", file=sys.stderr)
                return EXIT_USAGE
            from . import acp

            acp_code: int = acp.serve(args.state_dir, args.model, args.profile)
            return acp_code
        code: int = serve(
            args.state_dir, args.tcp, args.model, args.profile, token_file=args.token_file
        )
        return code
    if args.command is None or (args.command == "runs" and args.runs_command is None):
        args.print_help()  # a bare command shows what it can do
        return 0
    try:
        if args.command == "run":
            from .client.commands import run_command

            return run_command(run_options(args))
        if args.command == "demo":
            from .client.demo import run_demo

            return run_demo(_state_dir(args.state_dir), args.workspace, args.protocol)
        if args.command == "config":
            return config_command(args)
        return runs_command(args)
    except UsageError as exc:
        from .client._terminal import printable

        print(printable(f"cleveragents {args.command}: {exc}"), file=sys.stderr)
        return EXIT_USAGE


# -- settings ----------------------------------------------------------------------------


def _settings(**flags: str | None) -> dict[str, Any]:
    from .client._config import ConfigError, resolve

    try:
        return resolve(flags)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _state_dir(flag: Path | None) -> Path:
    setting = _settings(state_dir=str(flag) if flag else None)["state_dir"]
    return Path(setting.value).expanduser()


def config_command(args: argparse.Namespace) -> int:
    from .client._config import config_path

    path = config_path()
    settings = _settings()
    if args.json:
        print(json.dumps({"configFile": str(path), "exists": path.is_file(),
                          "settings": {k: {"value": s.value, "source": s.source}
                                       for k, s in settings.items()}}, indent=2))  # fmt: skip
        return 0
    print(f"config file  {path}{'' if path.is_file() else ' (none)'}")
    for key, setting in settings.items():
        value = setting.value if setting.value is not None else "-"
        print(f"{key:<12} {value}  ({setting.source})")
    return 0


# -- run ---------------------------------------------------------------------------------


def run_options(args: argparse.Namespace) -> Any:
    from .client.commands import RunOptions

    settings = _settings(
        model=args.model, profile=args.profile,
        state_dir=str(args.state_dir) if args.state_dir else None,
    )  # fmt: skip
    state_dir = Path(settings["state_dir"].value).expanduser().resolve()
    workspace = _workspace(args.workspace)
    words = list(args.words)
    continue_from = None
    if args.continue_:
        if len(words) > 2:
            raise UsageError("--continue takes [RUN_ID] PROMPT: quote the prompt")
        continue_from = words.pop(0) if len(words) == 2 else _latest_run(state_dir, workspace)
    elif len(words) > 1:
        raise UsageError(f"expected one prompt, got {len(words)} words: quote the prompt")
    from_stdin = (words == ["-"]) or (not words and not sys.stdin.isatty())
    if from_stdin:
        prompt = sys.stdin.read()
    elif words:
        prompt = words[0]
    else:
        raise UsageError("no prompt: pass one as an argument, or '-' to read it from stdin")
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return RunOptions(
        prompt=prompt, workspace=workspace, state_dir=state_dir,
        model=_model(settings["model"]), profile=_profile(settings["profile"]),
        system=args.system, max_iterations=args.max_iterations, yes=args.yes, json=args.json,
        continue_from=continue_from, interactive=sys.stdin.isatty() and not from_stdin,
    )  # fmt: skip


def _workspace(flag: Path | None) -> Path:
    workspace = (flag or Path.cwd()).expanduser().resolve()
    if not workspace.is_dir():
        raise UsageError(f"--workspace {workspace} is not a directory")
    if flag is None and workspace in (Path("/"), Path.home().resolve()):
        raise UsageError(
            f"refusing {workspace} as the workspace (every file under it would be in reach "
            f"of the model): cd into a project, or pass --workspace {workspace} if you mean it"
        )
    return workspace


def _model(setting: Any) -> str | dict[str, Any]:
    from .client._config import config_path
    from .llm.errors import ModelConfigError
    from .llm.spec import parse_model_spec

    raw, source = setting.value, setting.source
    if not raw:
        raise UsageError(
            "no model: pass -m/--model SPEC (for example openai:gpt-4o-mini, or "
            "scripted:turns.json), set CLEVERAGENTS_MODEL, or set model in "
            f"{config_path()}"
        )
    value: str | dict[str, Any] = raw.strip()
    text = str(value)
    if text.startswith("@"):
        try:
            text = Path(text[1:]).expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{source}: cannot read {text[1:]}: {exc}") from None
        value = text
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{source}: not a JSON object: {exc}") from None
        if not isinstance(value, dict):
            raise UsageError(f"{source}: expected a JSON object")
    try:
        spec = parse_model_spec(value)
    except ModelConfigError as exc:
        raise UsageError(f"{source}: {exc.message}") from None
    if spec.provider == "client":
        raise UsageError(
            f"{source}: 'client' is the model of an editor that answers llm/generate; "
            "the command line has none to lend: name a provider"
        )
    return value


def _profile(setting: Any) -> str:
    from .workspace.profiles import BUILTIN_PROFILES

    name = str(setting.value)
    if name not in BUILTIN_PROFILES:
        where = "--profile" if setting.source == "--profile" else f"profile (from {setting.source})"
        raise UsageError(f"{where}: unknown profile {name!r}; choose one of "
                         + ", ".join(BUILTIN_PROFILES))  # fmt: skip
    return name


def _latest_run(state_dir: Path, workspace: Path) -> str:
    """The newest finished run whose sandbox was ``workspace``."""
    from .transcripts import TranscriptStore

    store = TranscriptStore(state_dir)
    for summary in store.summaries():
        if summary["active"]:
            continue
        for event in store.events(summary["runId"]):
            if event.get("method") == "run/started":
                if event["params"].get("sandboxRoot") == str(workspace):
                    return str(summary["runId"])
                break
    raise UsageError(
        f"--continue: no earlier run in {workspace} (in {state_dir}); name one: "
        "--continue RUN_ID PROMPT (cleveragents runs list shows them)"
    )


def _configure_logging(level: str) -> None:
    """Log to stderr only (stdout is the wire, for both faces of ``serve``); pygls's own
    loggers stay at WARNING."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.getLevelName(level)))


# -- runs --------------------------------------------------------------------------------


def runs_command(args: argparse.Namespace) -> int:
    """Read transcripts directly: no daemon is needed to look at past runs, and none is
    imported (nor pygls): ``cleveragents.transcripts`` stands on the core alone."""
    import shutil

    from .client._history import list_lines, show_lines
    from .client._terminal import json_text, printable
    from .transcripts import RunNotFoundError, RunStateError, TranscriptStore

    store = TranscriptStore(_state_dir(args.state_dir))
    if args.runs_command == "list":
        summaries = store.summaries()[: args.limit]
        if args.json:
            print(json_text(summaries, indent=2))
        else:
            width = shutil.get_terminal_size().columns
            print("\n".join(list_lines(summaries, width)))
        return 0
    try:
        result = store.result(args.run_id)
    except (RunNotFoundError, RunStateError) as exc:
        print(printable(f"cleveragents runs show: {exc.message}"), file=sys.stderr)
        return 1
    if args.json:
        print(json_text(result, indent=2))
        return 0
    meta = next(iter(store.events(args.run_id)), {}).get("params", {})
    print("\n".join(show_lines(result, str(meta.get("startedAt", "")),
                               str(meta.get("prompt", "")))))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
