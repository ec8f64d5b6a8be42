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

from ._cli_parser import build_parser

EXIT_USAGE = 2


class UsageError(Exception):
    """A bad argument or setting: printed as ``cleveragents CMD: MESSAGE``, exit 2."""


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
            # As for serve: no full collection while the run service's modules load;
            # run_command freezes what exists and turns the collector back on.
            gc.disable()
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
    if not isinstance(meta, dict):  # a line of the wrong shape reads as none
        meta = {}
    print("\n".join(show_lines(result, str(meta.get("startedAt", "")),
                               str(meta.get("prompt", "")))))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
