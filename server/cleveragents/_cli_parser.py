"""The ``cleveragents`` command line: its sub-commands, flags and help.

Only ``argparse`` and the standard library are imported here, so building the parser
costs nothing a command does not need (the profile table in ``run --help`` is read only
when help is shown).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from . import _cli_mcp


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


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}


def duration_seconds(value: str) -> float:
    """``--deadline``: seconds as ``90``, ``90s``, ``1.5m``, ``5m``, ``1h`` or ``1h30m``."""
    text = value.strip().lower()
    seconds: float | None = None
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
    elif text and "".join(m.group() for m in _DURATION_PART.finditer(text)) == text:
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))
    if seconds is None:
        raise argparse.ArgumentTypeError(
            f"expected a duration such as 90 (seconds), 90s, 5m, 1h or 1h30m, got {value!r}"
        )
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {value!r}")
    return seconds


def _log_level(value: str) -> str:
    names = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    if value.upper() not in names:
        raise argparse.ArgumentTypeError(
            f"unknown level {value!r}: choose one of {', '.join(names)} (any case)"
        )
    return value.upper()


def _profiles_help() -> str:
    from .workspace.profiles import BUILTIN_PROFILES, DEFAULT_PROFILE

    lines = ["automation profiles (--profile; what each does with read / write / execute tools):"]
    for name, profile in BUILTIN_PROFILES.items():
        marks = f"{profile.read}/{profile.write}/{profile.execute}"
        default = " (default)" if name == DEFAULT_PROFILE else ""
        lines.append(f"  {name:<11} {marks:<18} {profile.description}{default}")
    lines += [
        "'ask' prompts on the terminal ([y]es / [n]o / [a]lways), /dev/tty when stdin is a",
        "pipe; --yes allows it unasked; with no terminal at all it is refused (not approved).",
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


class LeanParseError(Exception):
    """The serve-only parser met help, usage or an error: parse again with the whole
    parser, which prints it as always."""


class _LeanParser(_Parser):
    """A parser of ``build_parser(serve_only=True)``: it prints nothing and exits
    nowhere; whatever it would say raises ``LeanParseError`` instead."""

    def print_usage(self, file: Any = None) -> None:
        raise LeanParseError

    def print_help(self, file: Any = None) -> None:
        raise LeanParseError

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise LeanParseError

    def error(self, message: str) -> Any:
        raise LeanParseError


def build_parser(*, serve_only: bool = False) -> argparse.ArgumentParser:
    """The whole command line: one sub-parser per command.

    ``serve_only`` builds the top level and ``serve``'s sub-parser alone, for the
    daemon's start (an editor waits on it): the other 24 parsers cost ~6 ms, most of it
    argparse looking up the translations of its own words for each. What it parses is
    what the whole parser gives for ``serve``; it raises ``LeanParseError`` for anything
    it would print (help, usage, an error), so the caller asks the whole parser."""
    from . import __version__

    parser_class = _LeanParser if serve_only else argparse.ArgumentParser
    parser = parser_class(
        prog="cleveragents",
        description="A tool-calling runtime for LLM actors: run a prompt, run the demo, look "
        "at past runs, or serve the daemon to an editor.",
    )
    parser.add_argument("--version", action="version", version=f"cleveragents {__version__}")
    if serve_only:  # the whole parser's help, should anything ask for it
        parser.set_defaults(print_help=lambda file=None: build_parser().print_help(file))
    else:
        parser.set_defaults(print_help=parser.print_help)
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_LeanParser if serve_only else _Parser
    )
    if serve_only:
        _add_serve(sub)
        return parser
    _add_run(sub)
    _add_chat(sub)
    _add_demo(sub)
    _add_runs(sub)
    config = sub.add_parser("config", help="the effective settings and where each comes from")
    config.add_argument("--json", action="store_true")
    _add_models_and_keys(sub)
    _cli_mcp.add_parser(sub)
    _add_serve(sub)
    return parser


def _add_run(sub: Any) -> None:
    run = sub.add_parser(
        "run", help="run a prompt on the workspace and show it live",
        description="Run a prompt on the workspace, in this process, and show the run as it "
        "happens. Off a terminal, stdout holds the answer alone; the rest goes to stderr.",
        epilog_factory=_profiles_help, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    run.add_argument(
        "words", nargs="*", metavar="[RUN_ID] PROMPT",
        help="the prompt; a piped stdin is added to it in a fenced block (alone, it is the "
        "prompt; '-' reads the prompt from stdin); with --continue, an optional run id first",
    )  # fmt: skip
    run.add_argument(
        "-m", "--model", metavar="SPEC",
        help="a known model's name (gpt-4o-mini, claude-sonnet-4-5: cleveragents models), "
        "a spec (openai:gpt-4o-mini, anthropic:MODEL, gemini:MODEL, scripted:FILE), "
        "an inline JSON object ({\"provider\": \"openai\", \"model\": ..., "
        "\"baseUrl\": ...}) or @FILE holding either; else $CLEVERAGENTS_MODEL, else config.toml",
    )  # fmt: skip
    run.add_argument(
        "--system", metavar="TEXT",
        help="added to the system prompt, after the default instructions and AGENTS.md",
    )  # fmt: skip
    run.add_argument(
        "--no-instructions", dest="instructions", action="store_false",
        help="no default system prompt: neither cleveragents' own (workspace, date, OS, "
        "tools) nor the workspace's AGENTS.md; --system alone, if given",
    )  # fmt: skip
    run.add_argument(
        "--workspace", type=Path, metavar="DIR",
        help="the sandbox root (default: the current directory, unless it is / or your home)",
    )  # fmt: skip
    run.add_argument("--max-iterations", type=_positive, metavar="N", help="default 25")
    run.add_argument(
        "--max-tool-calls", type=_positive, metavar="N", help="stop after N tool calls"
    )
    run.add_argument(
        "--deadline", type=duration_seconds, metavar="TIME",
        help="stop after this long, the call in flight cancelled: 90 (seconds), 90s, 5m, 1h30m",
    )  # fmt: skip
    run.add_argument(
        "--max-tokens", type=_positive, metavar="N",
        help="stop once the run's input and output tokens reach N (as the provider counts them)",
    )  # fmt: skip
    run.add_argument("--profile", metavar="NAME", help="automation profile (listed below)")
    run.add_argument("-y", "--yes", action="store_true", help="allow what the profile would ask")
    run.add_argument("--json", action="store_true", help="print each notification as JSON")
    run.add_argument(
        "--no-reasoning", dest="reasoning", action="store_false",
        help="hide the model's reasoning (shown dimmed; off a terminal, on stderr)",
    )  # fmt: skip
    run.add_argument(
        "-o", "--output-last-message", dest="output", type=Path, metavar="FILE",
        help="also write the answer (the run's last text) to FILE",
    )  # fmt: skip
    run.add_argument("--state-dir", type=Path, metavar="DIR", help="where transcripts go")
    _add_mcp_flags(run)
    run.add_argument(
        "--fork", metavar="RUN_ID[@K]",
        help="start from RUN_ID's conversation as it stood after iteration K (default: its "
        "last), continued with the prompt; its model, profile and workspace are reused",
    )  # fmt: skip
    run.add_argument(
        "--restore-files", action="store_true",
        help="with --fork: first put the files back as they were after that iteration "
        "(refused when a file it would touch was changed since that run's last checkpoint)",
    )  # fmt: skip
    run.add_argument(
        "--no-checkpoints", dest="checkpoints", action="store_false",
        help="take no checkpoints of the files (no diffstat at the end; runs diff and "
        "revert then have nothing of this run)",
    )  # fmt: skip
    run.add_argument(
        "--continue", dest="continue_", action="store_true",
        help="continue the latest run in this workspace, or RUN_ID (or a unique prefix of 4+ "
        "characters); its model, profile and workspace are reused unless given",
    )  # fmt: skip


def _add_chat(sub: Any) -> None:
    chat = sub.add_parser(
        "chat", help="a conversation in the workspace, each message a run continuing the last",
        description="Talk with the model in the workspace, in this process: each message is a "
        "run that continues the conversation, shown live, with approvals; /help lists the "
        "commands. It needs a terminal: from a script or a pipe, use run and run --continue.",
        epilog_factory=_profiles_help, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    chat.add_argument(
        "-m", "--model", metavar="SPEC",
        help="as for run (else $CLEVERAGENTS_MODEL, else config.toml); /model changes it",
    )  # fmt: skip
    chat.add_argument(
        "--system", metavar="TEXT",
        help="added to the system prompt, after the default instructions and AGENTS.md",
    )  # fmt: skip
    chat.add_argument(
        "--no-instructions", dest="instructions", action="store_false",
        help="no default system prompt: neither cleveragents' own (workspace, date, OS, "
        "tools) nor the workspace's AGENTS.md; --system alone, if given",
    )  # fmt: skip
    chat.add_argument(
        "--workspace", type=Path, metavar="DIR",
        help="the sandbox root (default: the current directory, unless it is / or your home)",
    )  # fmt: skip
    chat.add_argument(
        "--max-iterations", type=_positive, metavar="N", help="per message; default 25"
    )
    chat.add_argument(
        "--max-tool-calls", type=_positive, metavar="N", help="per message: stop after N tool calls"
    )
    chat.add_argument(
        "--deadline", type=duration_seconds, metavar="TIME",
        help="per message: stop after this long (90, 90s, 5m, 1h30m)",
    )  # fmt: skip
    chat.add_argument(
        "--max-tokens", type=_positive, metavar="N",
        help="per message: stop once its input and output tokens reach N",
    )  # fmt: skip
    chat.add_argument(
        "--no-reasoning", dest="reasoning", action="store_false",
        help="hide the model's reasoning (shown dimmed)",
    )  # fmt: skip
    chat.add_argument(
        "--profile", metavar="NAME", help="automation profile (listed below); /profile changes it"
    )
    chat.add_argument("-y", "--yes", action="store_true", help="allow what the profile would ask")
    chat.add_argument(
        "--state-dir", type=Path, metavar="DIR", help="where transcripts and the chat history go"
    )
    _add_mcp_flags(chat)
    chat.add_argument(
        "--continue", dest="continue_", nargs="?", const="", metavar="RUN_ID",
        help="go on with the latest run in this workspace, or RUN_ID (or a unique prefix of 4+ "
        "characters); its model, profile and workspace are reused unless given",
    )  # fmt: skip


def _add_mcp_flags(command: Any) -> None:
    command.add_argument(
        "--mcp", action="append", default=[], metavar="'NAME=COMMAND ARGS'",
        help="start an MCP server for this run: its command and arguments split as a shell "
        "would (quote the whole value), or NAME=URL for streamable HTTP; repeatable",
    )  # fmt: skip
    command.add_argument(
        "--mcp-config", action="append", default=[], type=Path, metavar="FILE",
        help='MCP servers from a JSON file shaped as .mcp.json ({"mcpServers": {...}}); '
        "repeatable. config.toml's [mcp_servers.NAME] and the workspace's approved "
        ".mcp.json servers start too (cleveragents mcp list)",
    )  # fmt: skip


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser("demo", help="a scripted run on a sample project: no key, no network")
    demo.add_argument("--workspace", type=Path, help="use this folder instead of a temp copy")
    demo.add_argument("--state-dir", type=Path, metavar="DIR", help="where its transcript goes")
    demo.add_argument(
        "--protocol", choices=("lsp", "acp"), default="lsp",
        help="lsp: our protocol (default); acp: play an editor speaking the Agent Client Protocol",
    )  # fmt: skip


def _add_runs(sub: Any) -> None:
    runs = sub.add_parser("runs", help="list or show past runs, see and undo what they changed")
    runs.set_defaults(print_help=runs.print_help)
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="{list,show,diff,revert,restore}")
    listing = runs_sub.add_parser("list", help="the runs, newest first")
    listing.add_argument("--limit", type=_positive, default=20, metavar="N", help="default 20")
    listing.add_argument("--json", action="store_true", help="the RunSummary list as JSON")
    listing.add_argument("--state-dir", type=Path, metavar="DIR")
    show = runs_sub.add_parser("show", help="one run: status, content, tool calls")
    show.add_argument(
        "run_id", metavar="RUN_ID", help="a run id, or a unique prefix of 4+ characters"
    )
    show.add_argument("--json", action="store_true", help="the RunResult as JSON")
    show.add_argument("--state-dir", type=Path, metavar="DIR")
    _add_checkpoint_commands(runs_sub)


def _add_checkpoint_commands(runs_sub: Any) -> None:
    """``runs diff|revert|restore``: what a run changed in its workspace, and undoing it
    (docs/checkpoints.md)."""
    run_id_help = "a run id, or a unique prefix of 4+ characters"
    diff = runs_sub.add_parser(
        "diff", help="what a run changed in its workspace, as a diffstat and a patch"
    )
    diff.add_argument("run_id", metavar="RUN_ID", help=run_id_help)
    diff.add_argument(
        "--iteration", type=_positive, metavar="K", help="only what iteration K changed"
    )
    diff.add_argument("--stat", action="store_true", help="the diffstat alone, no patch")
    diff.add_argument("--state-dir", type=Path, metavar="DIR")
    revert = runs_sub.add_parser(
        "revert", help="put the files a run changed back as they were before it",
        description="Put back the files a run changed, as they were before it. It refuses, "
        "changing nothing, when a file it would touch was changed since the run's last "
        "checkpoint (exit 3), unless --force. It prints the checkpoint that undoes it.",
    )  # fmt: skip
    revert.add_argument("run_id", metavar="RUN_ID", help=run_id_help)
    revert.add_argument(
        "--to-iteration", type=int, metavar="K",
        help="put the files back as they were after iteration K instead (0: before the run)",
    )  # fmt: skip
    _putting_back(revert, "overwrite files changed since the run's last checkpoint")
    restore = runs_sub.add_parser(
        "restore", help="put the workspace back to a checkpoint (undo a revert)",
        description="Put the workspace's files back as they were at a checkpoint: the one a "
        "revert printed undoes that revert. Conflicts refuse it as for revert (exit 3).",
    )  # fmt: skip
    restore.add_argument("checkpoint_id", metavar="CHECKPOINT_ID", help="16 hex digits")
    restore.add_argument(
        "--workspace", type=Path, metavar="DIR",
        help="the workspace the checkpoint is of (default: the one whose store holds it)",
    )  # fmt: skip
    _putting_back(restore, "overwrite files changed since the workspace's newest checkpoint")


def _putting_back(parser: Any, force_help: str) -> None:
    """The flags of the commands that put files back (``runs revert``, ``runs restore``)."""
    parser.add_argument(
        "--dry-run", action="store_true", help="say what it would do, and change nothing"
    )
    parser.add_argument("--force", action="store_true", help=force_help)
    parser.add_argument("--state-dir", type=Path, metavar="DIR")


def _add_models_and_keys(sub: Any) -> None:
    models = sub.add_parser(
        "models", help="the known models (for -m NAME), their windows, and whose key is set"
    )
    models.add_argument("--json", action="store_true")
    keys = sub.add_parser(
        "keys", help="keep API keys in the OS keyring (else a 0600 file); never shown",
        description="Keep API keys in the OS keyring where one is available (the keyring "
        "package), else in a 0600 file in the config folder. A key variable set in the "
        "environment still wins. A key is read from a hidden prompt, or from stdin: never "
        "from the command line.",
    )  # fmt: skip
    keys.set_defaults(print_help=keys.print_help)
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="{set,list,remove}")
    for name, about in (("set", "store PROVIDER's key, read from a hidden prompt or stdin"),
                        ("remove", "remove PROVIDER's stored key")):  # fmt: skip
        command = keys_sub.add_parser(name, help=about)
        command.add_argument(
            "provider", metavar="PROVIDER",
            help="openai, anthropic, gemini, ...; or a spec's apiKeyEnv variable (MY_API_KEY)",
        )  # fmt: skip
        if name == "set":  # a key given here is refused, without showing it
            command.add_argument("extra", nargs="*", help=argparse.SUPPRESS)
    listing = keys_sub.add_parser("list", help="which keys are available, and from where")
    listing.add_argument("--json", action="store_true")


def _add_serve(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the daemon (JSON-RPC with LSP framing on stdio)")
    serve.add_argument("--tcp", type=_tcp, metavar="HOST:PORT", help="listen on TCP instead")
    serve.add_argument(
        "--token-file", type=Path, metavar="PATH",
        help="--tcp access token, 32 characters or more (created 0600 with a random one if "
        "missing; default $CLEVERAGENTS_TOKEN, else STATE_DIR/tcp-token)",
    )  # fmt: skip
    serve.add_argument("--state-dir", type=Path, help="where transcripts go")
    serve.add_argument("--model", help="default model spec, e.g. scripted:turns.json")
    serve.add_argument("--profile", help="default automation profile (default: supervised)")
    serve.add_argument(
        "--log-level", type=_log_level, default="WARNING", metavar="LEVEL",
        help="stderr log level: DEBUG, INFO, WARNING (default), ERROR or CRITICAL",
    )  # fmt: skip
    serve.add_argument(
        "--no-instructions", dest="instructions", action="store_false",
        help="runs get no default system prompt (cleveragents' own nor the workspace's "
        "AGENTS.md); over LSP, run/start's instructions: true still asks for it",
    )  # fmt: skip
    serve.add_argument(
        "--no-checkpoints", dest="checkpoints", action="store_false",
        help="runs take no checkpoints of the workspace (no diff nor revert of them)",
    )  # fmt: skip
    serve.add_argument(
        "--protocol", choices=("lsp", "acp"), default="lsp",
        help="lsp: our protocol, LSP-framed (default); acp: the Agent Client Protocol",
    )  # fmt: skip
