"""The ``cleveragents`` command: ``serve`` (the daemon), ``run``, ``demo``, ``runs``,
``config``, ``models`` and ``keys`` (``_cli_keys``).

This module parses arguments and turns them into what the client-side commands take:
it resolves settings (flag, then environment, then ``config.toml``), checks the model
spec (a known model's bare name becomes ``provider:name``), the profile and the
workspace, reads the prompt (and a piped stdin), turns the limit flags into
``UsageLimits``, and finds the run to continue (``_cli_runs``: an id or a unique prefix;
its model, profile and workspace are reused unless given). Commands that build a model
(``run``, ``serve``) find the keys ``cleveragents keys`` stored (``_keystore``), after
the environment. Every usage error names the flag and exits 2. It is
the one place that may reach into the transcript store and the workspace's profile
table (the client layer may not); each import happens inside the command that needs
it, so ``serve`` loads only the daemon, ``runs`` never loads it, and ``run`` never loads
rich unless it draws the live view. Every command exits quietly, with 141, when its
stdout is closed early (``| head``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._cli_parser import LeanParseError, build_parser

EXIT_USAGE = 2
EXIT_CLOSED = 141
"""stdout was closed before the command wrote all of it (as for a process killed by
SIGPIPE)."""


_NO_MODEL = (None, "runs", "config", "models", "keys", "demo", "mcp")
"""Commands that build no model, so need no key source (``demo``'s daemon, a
``cleveragents serve`` of its own, installs it there)."""


class UsageError(Exception):
    """A bad argument or setting: printed as ``cleveragents CMD: MESSAGE``, exit 2."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head` stopped reading: no traceback, nothing more
        _quiet_stdout()
        return EXIT_CLOSED
    return code


def _quiet_stdout() -> None:
    """Point a stdout nobody reads at /dev/null: Python flushes it again at exit."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; ``run``'s words may come between its flags
    (``run --continue ID -m M PROMPT``): argparse takes only the first group of words,
    and the rest are added to them here. Raises ``SystemExit`` as argparse does."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["serve"]:  # the daemon's start: serve's own parser is enough
        try:
            args, extras = build_parser(serve_only=True).parse_known_args(words)
        except LeanParseError:  # help, usage or an error: the whole parser says it
            pass
        else:
            if not extras:
                return args
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if args.command == "mcp":  # `mcp add NAME [flags] -- COMMAND ARGS`
        from ._cli_mcp import take_extras

        extras = take_extras(args, extras)
    if extras:
        if args.command == "keys":  # one of them may be a key: never echoed
            print("cleveragents keys: unexpected arguments (not shown: one may be a key); "
                  "see cleveragents keys --help", file=sys.stderr)  # fmt: skip
            raise SystemExit(EXIT_USAGE)
        if args.command != "run" or any(e.startswith("-") and e != "-" for e in extras):
            parser.parse_args(argv)  # the error argparse gives for them (exits 2)
        args.words = [*args.words, *extras]
    return args


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = _parse(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and EXIT_USAGE
    if args.command in _NO_MODEL:
        return _command(args)
    from ._keystore import keys_installed

    with keys_installed():  # a model finds the keys `cleveragents keys` stored
        return _command(args)


def _command(args: argparse.Namespace) -> int:
    if args.command == "serve":
        # Importing lsprotocol grows the heap enough to trigger a full collection that
        # costs ~45 ms of startup; collect nothing until the server is built (then
        # ``serve`` freezes what exists and turns the collector back on).
        gc.disable()
        from .daemon import serve

        _configure_logging(args.log_level.upper())
        try:  # flags, then the environment, then config.toml; a bare model name resolved
            servers = serve_settings(args)
        except UsageError as exc:
            print(f"cleveragents serve: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if args.protocol == "acp":
            if args.tcp is not None:
                print("cleveragents serve: --protocol acp speaks on stdio only", file=sys.stderr)
                return EXIT_USAGE
            from . import acp

            acp_code: int = acp.serve(
                args.state_dir, args.model, args.profile, servers,
                instructions=args.instructions, checkpoints=args.checkpoints,
            )  # fmt: skip
            return acp_code
        code: int = serve(
            args.state_dir, args.tcp, args.model, args.profile, token_file=args.token_file,
            mcp_servers=servers, instructions=args.instructions, checkpoints=args.checkpoints,
        )  # fmt: skip
        return code
    if (
        args.command is None
        or (args.command == "runs" and args.runs_command is None)
        or (args.command == "keys" and args.keys_command is None)
        or (args.command == "mcp" and args.mcp_command is None)
    ):
        args.print_help()  # a bare command shows what it can do
        return 0
    try:
        if args.command == "run":
            # As for serve: no full collection while the run service's modules load;
            # run_command freezes what exists and turns the collector back on.
            gc.disable()
            from .client.commands import run_command

            return run_command(with_mcp(args, run_options(args)))
        if args.command == "chat":
            gc.disable()  # as for run: run_chat turns the collector back on
            from .client._chat import run_chat

            return run_chat(with_mcp(args, chat_options(args)))
        if args.command == "demo":
            from .client.demo import run_demo

            workspace = _demo_workspace(args.workspace)
            return run_demo(_state_dir(args.state_dir), workspace, args.protocol)
        if args.command == "config":
            return config_command(args)
        if args.command == "mcp":
            from ._cli_mcp import mcp_command

            return mcp_command(args)
        if args.command in ("models", "keys"):
            from ._cli_keys import keys_command, models_command

            return models_command(args) if args.command == "models" else keys_command(args)
        return runs_command(args)
    except UsageError as exc:
        from .client._terminal import printable

        print(printable(f"cleveragents {args.command}: {exc}"), file=sys.stderr)
        return EXIT_USAGE


# -- settings ----------------------------------------------------------------------------


def serve_settings(args: argparse.Namespace) -> Any:
    """``serve``'s model, profile and state dir, each from its flag, else its variable,
    else ``config.toml`` (set on ``args``; ``initializationOptions`` still win over them
    in the daemon), and ``config.toml``'s MCP servers. A bad file, a bad table or a bare
    model name nobody knows is a usage error here, before any editor waits on it."""
    from ._mcp_files import McpFileError, read_toml_servers
    from .client._config import config_path

    settings = _settings(
        model=args.model, profile=args.profile,
        state_dir=str(args.state_dir) if args.state_dir else None,
    )  # fmt: skip
    model = settings["model"]
    if model.value and not model.value.strip().startswith(("{", "@")):
        args.model = bare_model(model.value.strip(), model.source)
    else:
        args.model = model.value
    profile = settings["profile"]  # not checked here: initializationOptions may define it
    args.profile = profile.value if profile.source != "default" else None
    args.state_dir = Path(str(settings["state_dir"].value)).expanduser()
    try:
        entries = read_toml_servers(config_path())
    except McpFileError as exc:
        raise UsageError(str(exc)) from None
    return tuple(entry.config for entry in entries if entry.enabled)


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
    """The settings and their sources; a profile or model that ``run`` would refuse is
    reported (on stderr, and as ``problems`` with ``--json``), exit 2."""
    from .client._config import config_path

    path = config_path()
    settings = _settings()
    problems = _problems(settings)
    if args.json:
        print(json.dumps({"configFile": str(path), "exists": path.is_file(),
                          "settings": {k: {"value": s.value, "source": s.source}
                                       for k, s in settings.items()},
                          "problems": problems}, indent=2))  # fmt: skip
    else:
        print(f"config file  {path}{'' if path.is_file() else ' (none)'}")
        for key, setting in settings.items():
            value = setting.value if setting.value is not None else "-"
            print(f"{key:<12} {value}  ({setting.source})")
    if not problems:
        return 0
    from .client._terminal import printable

    for problem in problems:
        print(printable(f"cleveragents config: {problem}"), file=sys.stderr)
    return EXIT_USAGE


def _problems(settings: dict[str, Any]) -> list[str]:
    problems = []
    checks = [_profile] + ([_model] if settings["model"].value else [])
    for check, key in zip(checks, ("profile", "model"), strict=False):
        try:
            check(settings[key])
        except UsageError as exc:
            problems.append(str(exc))
    from ._mcp_files import McpFileError, read_toml_servers
    from .client._config import config_path

    try:  # the [mcp_servers.NAME] tables, as run and serve would read them
        read_toml_servers(config_path())
    except McpFileError as exc:
        problems.append(str(exc))
    return problems


def _demo_workspace(flag: Path | None) -> Path | None:
    if flag is None:
        return None
    workspace = flag.expanduser().resolve()
    if not workspace.is_dir():
        raise UsageError(f"--workspace {workspace} is not a directory")
    if not (workspace / "src" / "greet.py").is_file():
        raise UsageError(
            f"--workspace {workspace} has no src/greet.py, which the demo's script fixes: "
            "omit --workspace to run it on a temporary copy of its sample project"
        )
    return workspace


# -- run ---------------------------------------------------------------------------------


def run_options(args: argparse.Namespace) -> Any:
    from .client.commands import RunOptions

    settings = _settings(
        model=args.model, profile=args.profile,
        state_dir=str(args.state_dir) if args.state_dir else None,
    )  # fmt: skip
    state_dir = Path(settings["state_dir"].value).expanduser().resolve()
    words = list(args.words)
    earlier = None
    fork = None
    if args.fork is not None:
        if args.continue_:
            raise UsageError("--fork and --continue: choose one (--fork RUN_ID@K continues a run "
                             "from one of its iterations)")  # fmt: skip
        fork, earlier = _forked(state_dir, args.fork, args.restore_files)
    elif args.restore_files:
        raise UsageError("--restore-files goes with --fork RUN_ID[@K]")
    if args.continue_:
        if len(words) > 2:
            raise UsageError("--continue takes [RUN_ID] PROMPT: quote the prompt")
        earlier = _continued(state_dir, words.pop(0) if len(words) == 2 else None, args.workspace)
    elif len(words) > 1:
        raise UsageError(f"expected one prompt, got {len(words)} words: quote the prompt")
    if earlier is not None and args.workspace is None and earlier.workspace:
        workspace = _earlier_workspace(earlier)
    else:
        workspace = _workspace(args.workspace)
    prompt, stdin_taken = _prompt(words[0] if words else None)
    if earlier is not None and not args.model:
        model = _reused_model(settings["model"], earlier)
    else:
        model = _model(settings["model"])
    from .workspace.profiles import BUILTIN_PROFILES

    if earlier is not None and not args.profile and earlier.profile in BUILTIN_PROFILES:
        profile = str(earlier.profile)
    else:
        profile = _profile(settings["profile"])
    return RunOptions(
        prompt=prompt, workspace=workspace, state_dir=state_dir, model=model, profile=profile,
        instructions=args.instructions,
        system=args.system, max_iterations=args.max_iterations, yes=args.yes, json=args.json,
        continue_from=earlier.run_id if earlier is not None and fork is None else None,
        stdin_taken=stdin_taken, output_file=_output_file(args.output),
        reasoning=args.reasoning, limits=_limits(args), checkpoints=args.checkpoints,
        fork_from=fork,
    )  # fmt: skip


def with_mcp(args: argparse.Namespace, options: Any) -> Any:
    """``options`` with the MCP servers the run starts: ``--mcp``, ``--mcp-config``,
    ``config.toml``'s tables and the workspace's approved ``.mcp.json`` servers (asked
    about on the terminal when new; ``_mcp_commands``)."""
    import attrs

    from ._mcp_commands import McpUsageError, servers_for_run

    try:
        servers = servers_for_run(options.workspace, options.state_dir, args.mcp, args.mcp_config)
    except McpUsageError as exc:
        raise UsageError(str(exc)) from None
    return attrs.evolve(options, mcp_servers=servers)


def _limits(args: argparse.Namespace) -> Any:
    """``--max-tool-calls``, ``--deadline`` and ``--max-tokens`` as ``UsageLimits``;
    ``None`` when none is given."""
    if args.max_tool_calls is None and args.deadline is None and args.max_tokens is None:
        return None
    from .tool import UsageLimits

    return UsageLimits(max_tool_calls=args.max_tool_calls, deadline_s=args.deadline,
                       max_total_tokens=args.max_tokens)  # fmt: skip


def chat_options(args: argparse.Namespace) -> Any:
    """``chat``'s settings, resolved as ``run``'s (a continued run's model, profile and
    workspace are reused unless given). It needs a terminal on stdin and stdout: lines
    from a pipe would be messages nobody sees answered, with nobody to ask approvals."""
    from .client._chat import ChatOptions
    from .client._config import Setting
    from .workspace.profiles import BUILTIN_PROFILES

    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        if stream is None or not _isatty(stream):
            raise UsageError(
                f"needs a terminal, and {name} is not one: from a script or a pipe, use "
                "cleveragents run PROMPT, then cleveragents run --continue PROMPT"
            )
    settings = _settings(
        model=args.model, profile=args.profile,
        state_dir=str(args.state_dir) if args.state_dir else None,
    )  # fmt: skip
    state_dir = Path(settings["state_dir"].value).expanduser().resolve()
    earlier = None
    if args.continue_ is not None:
        earlier = _continued(state_dir, args.continue_ or None, args.workspace)
    if earlier is not None and args.workspace is None and earlier.workspace:
        workspace = _earlier_workspace(earlier)
    else:
        workspace = _workspace(args.workspace)
    if earlier is not None and not args.model:
        model = _reused_model(settings["model"], earlier)
    else:
        model = _model(settings["model"])
    if earlier is not None and not args.profile and earlier.profile in BUILTIN_PROFILES:
        profile = str(earlier.profile)
    else:
        profile = _profile(settings["profile"])

    def check_model(text: str) -> str | dict[str, Any]:
        try:
            return _model(Setting(text, "/model"))
        except UsageError as exc:
            raise ValueError(str(exc)) from None

    return ChatOptions(
        workspace=workspace, state_dir=state_dir, model=model, profile=profile,
        instructions=args.instructions,
        check_model=check_model, system=args.system, max_iterations=args.max_iterations,
        yes=args.yes, continue_from=earlier.run_id if earlier is not None else None,
        continued_prompt=earlier.prompt if earlier is not None else "",
        reasoning=args.reasoning, limits=_limits(args),
    )  # fmt: skip


def _prompt(word: str | None) -> tuple[str, bool]:
    """The prompt, and whether stdin was read for it. ``-`` reads it from stdin; a piped
    stdin is the prompt when none is given, else it is added to it (the prompt, then the
    input in a fenced block), as ``llm`` does."""
    stdin = sys.stdin
    piped = stdin is not None and not _isatty(stdin)
    if word == "-" or (word is None and piped):
        prompt, taken = _read_stdin(), True
    elif word is None:
        raise UsageError("no prompt: pass one as an argument, or '-' to read it from stdin")
    elif piped:
        data, taken = _read_stdin(), True
        prompt = with_input(word, data) if data.strip() else word
    else:
        prompt, taken = word, False
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return prompt, taken


def with_input(prompt: str, data: str) -> str:
    """The prompt, then ``data`` in a fenced block whose fence no line of it closes."""
    longest = max((len(run) for run in re.findall(r"`+", data)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{prompt}\n\n{fence}\n{data.rstrip(chr(10))}\n{fence}"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError):
        return False


def _read_stdin() -> str:
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:
        return str(sys.stdin.read())
    data: bytes = buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"stdin is not UTF-8 text (byte {exc.start} is not)") from None


def _output_file(flag: Path | None) -> Path | None:
    if flag is None:
        return None
    path = flag.expanduser().absolute()
    if path.is_dir():
        raise UsageError(f"-o {flag}: is a directory; name a file")
    if not path.parent.is_dir():
        raise UsageError(f"-o {flag}: {path.parent} is not a directory")
    return path


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
    else:
        value = bare_model(text, source)
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


def bare_model(text: str, source: str) -> str:
    """A model named without its provider (``gpt-4o``), as ``provider:name`` by the
    known-models table (``cleveragents models``); any other spec as it is. An unknown
    bare name is a usage error saying how to name it."""
    from .llm import find_model, providers

    if ":" in text or any(p.name == text for p in providers()):
        return text  # a spec, or a provider named alone (its own error, or ``client``)
    known = find_model(text)
    if known is not None:
        return f"{known.provider}:{text}"
    takes_model = [p.name for p in providers() if p.takes == "model"]
    forms = ", ".join(f"{name}:{text}" for name in takes_model[:3])
    raise UsageError(
        f"{source}: unknown model {text!r}: name its provider ({forms}, ...), or use a "
        "model the known-models table names (cleveragents models lists them)"
    )


def _profile(setting: Any) -> str:
    from .workspace.profiles import BUILTIN_PROFILES

    name = str(setting.value)
    if name not in BUILTIN_PROFILES:
        where = "--profile" if setting.source == "--profile" else f"profile (from {setting.source})"
        raise UsageError(f"{where}: unknown profile {name!r}; choose one of "
                         + ", ".join(BUILTIN_PROFILES))  # fmt: skip
    return name


def _continued(state_dir: Path, named: str | None, workspace_flag: Path | None) -> Any:
    """The run ``--continue`` continues (``named``: an id or a unique prefix; else the
    latest finished run in this workspace), as ``RunFacts``."""
    from ._cli_runs import facts, latest_in, resolve
    from .transcripts import RunNotFoundError, TranscriptStore

    store = TranscriptStore(state_dir)
    try:
        if named is not None:
            return facts(store, resolve(store, named))
        workspace = _workspace(workspace_flag)
        latest = latest_in(store, str(workspace))
        if latest is None:
            raise UsageError(
                f"--continue: no earlier run in {workspace} (in {state_dir}); name one: "
                "--continue RUN_ID PROMPT (cleveragents runs list shows them)"
            )
        return facts(store, latest)
    except RunNotFoundError as exc:
        raise UsageError(f"--continue: {exc.message}") from None


def _forked(state_dir: Path, text: str, restore_files: bool) -> tuple[Any, Any]:
    """``--fork RUN_ID[@K]``: the ``ForkFrom`` (K: the run's last iteration when not
    given) and the run's ``RunFacts`` (its model, profile and workspace are reused)."""
    from ._cli_runs import facts, resolve
    from .runs import ForkFrom
    from .transcripts import RunNotFoundError, RunStateError, TranscriptStore

    named, at, iteration_text = text.partition("@")
    if at and not iteration_text.isdigit():
        raise UsageError(f"--fork {text}: expected RUN_ID@K, K an iteration number (0: the "
                         "prompt alone)")  # fmt: skip
    store = TranscriptStore(state_dir)
    try:
        run_id = resolve(store, named)
        about = facts(store, run_id)
        last = int(store.result(run_id).get("iterations") or 0)
    except (RunNotFoundError, RunStateError) as exc:
        raise UsageError(f"--fork: {exc.message}") from None
    iteration = int(iteration_text) if at else last
    if iteration > last:
        raise UsageError(f"--fork: run {run_id} has {last} iteration{'s' if last != 1 else ''},"
                         f" not {iteration}")  # fmt: skip
    return ForkFrom(run_id, iteration, restore_files=restore_files), about


def _earlier_workspace(earlier: Any) -> Path:
    """The continued run's workspace, reused: it was chosen then (even / or home)."""
    workspace = Path(earlier.workspace)
    if not workspace.is_dir():
        raise UsageError(
            f"--continue: run {earlier.run_id} ran in {workspace}, which is no longer a "
            "directory: pass --workspace"
        )
    return workspace


def _reused_model(setting: Any, earlier: Any) -> str | dict[str, Any]:
    """The continued run's model, as its transcript names it. The configured model is
    taken instead when it is the same one (it may say more: a base URL, a key variable);
    a model the transcript cannot name again (inline turns, an editor's) falls back to
    the configured one."""
    from .client._config import Setting
    from .llm.errors import ModelConfigError
    from .llm.spec import parse_model_spec

    label = earlier.model
    if setting.value:
        with contextlib.suppress(UsageError, ModelConfigError):
            if parse_model_spec(_model(setting)).describe() == label:
                return _model(setting)
    if label and "<inline>" not in label:
        with contextlib.suppress(UsageError):
            return _model(Setting(label, f"--continue (the model of run {earlier.run_id})"))
    if setting.value:
        return _model(setting)
    raise UsageError(
        f"--continue: run {earlier.run_id} used the model {label or 'of its face'}, which "
        "cannot be named again here: pass -m/--model"
    )


def _configure_logging(level: str) -> None:
    """Log to stderr only (stdout is the wire, for both faces of ``serve``); pygls's own
    loggers stay at WARNING."""
    import logging

    from .llm import log_scrubber

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # On the handler, from the first line: every record it writes is scrubbed of secrets
    # and URL credentials, whichever logger made it (an MCP server's URL, at DEBUG too).
    handler.addFilter(log_scrubber())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.getLevelName(level)))


# -- runs --------------------------------------------------------------------------------


def runs_command(args: argparse.Namespace) -> int:
    """Read transcripts directly: no daemon is needed to look at past runs, and none is
    imported (nor pygls): ``cleveragents.transcripts`` stands on the core alone."""
    import shutil

    from ._cli_runs import facts, resolve
    from .client._history import list_lines, show_lines
    from .client._terminal import json_text, printable
    from .transcripts import RunNotFoundError, RunStateError, TranscriptStore

    if args.runs_command in ("diff", "revert", "restore"):
        from ._cli_checkpoints import checkpoints_command

        return checkpoints_command(args, _state_dir(args.state_dir))
    store = TranscriptStore(_state_dir(args.state_dir))
    if args.runs_command == "list":
        every = store.summaries()
        summaries = every[: args.limit]
        shown = []
        for summary in summaries:
            try:
                about = facts(store, str(summary["runId"]))
            except RunNotFoundError:  # removed since it was listed
                continue
            shown.append({**summary, "model": about.model, "workspace": about.workspace})
        if args.json:  # each RunSummary with what the table shows beside it
            print(json_text(shown, indent=2))
            return 0
        width = shutil.get_terminal_size().columns
        print("\n".join(list_lines(shown, width, [str(s["runId"]) for s in every])))
        return 0
    try:
        run_id = resolve(store, args.run_id)
        result = store.result(run_id)
        about = facts(store, run_id)
    except (RunNotFoundError, RunStateError) as exc:
        print(printable(f"cleveragents runs show: {exc.message}"), file=sys.stderr)
        return 1
    if args.json:
        print(json_text(rounded(result), indent=2))
        return 0
    print("\n".join(show_lines(result, about.about())))
    return 0


def rounded(result: dict[str, Any]) -> dict[str, Any]:
    """A ``RunResult`` with its durations to the microsecond (``735.879``, not
    ``735.8785199999147``): printed for people and scripts; the wire keeps its floats."""
    out = dict(result)
    if isinstance(out.get("durationMs"), float):
        out["durationMs"] = round(out["durationMs"], 3)
    records = out.get("toolCallHistory")
    if isinstance(records, list):
        out["toolCallHistory"] = [
            {**r, "durationMs": round(r["durationMs"], 3)}
            if isinstance(r, dict) and isinstance(r.get("durationMs"), float) else r
            for r in records
        ]  # fmt: skip
    return out


if __name__ == "__main__":
    sys.exit(main())
