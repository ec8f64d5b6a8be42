"""What ``cleveragents mcp`` does, and the MCP servers a ``run`` or ``chat`` starts.

:func:`servers_for_run` gathers them, the first of a name winning: ``--mcp``, then
``--mcp-config`` files, then ``config.toml``'s tables (the user's choices), then the
workspace's ``.mcp.json`` (the repository's choice), whose servers start only when the
user approved them as they are written now (:mod:`cleveragents._mcp_approvals`): asked
once on the terminal (``/dev/tty`` when stdin is a pipe; ``--yes`` does not answer it),
and with nobody to ask, not started, with a line saying how to approve them.

``add`` and ``remove`` edit ``config.toml`` as text, so its comments and layout stay:
a table is appended, or its lines (and its sub-tables') removed; the result is parsed
and checked before it replaces the file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._mcp_approvals import Approvals
from ._mcp_files import (
    Entry,
    McpFileError,
    describe,
    fingerprint,
    flag_entry,
    json_entries,
    read_toml_servers,
)
from .client._config import config_path
from .mcp import SERVER_NAME_PATTERN, McpServerConfig

WORKSPACE_FILE = ".mcp.json"


class McpUsageError(Exception):
    """A bad flag, file or table: printed as ``cleveragents CMD: MESSAGE``, exit 2."""


def _usage(exc: McpFileError) -> McpUsageError:
    return McpUsageError(str(exc))


# -- the servers of a run ----------------------------------------------------------------


def gather(
    workspace: Path,
    flags: Sequence[str] = (),
    config_files: Sequence[Path] = (),
    config: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> tuple[list[Entry], list[Entry]]:
    """``(the user's entries, the workspace's .mcp.json entries)``, each name once (the
    first source wins; a ``.mcp.json`` server never replaces one of the user's). A bad
    file of the user's is a :class:`McpUsageError`; a bad ``.mcp.json`` is said (``say``)
    and ignored: the repository's file never stops the user's run."""
    try:
        mine = [flag_entry(text) for text in flags]
        for path in config_files:
            mine += json_entries(path.expanduser())
        mine += read_toml_servers(config if config is not None else config_path())
    except McpFileError as exc:
        raise _usage(exc) from None
    theirs = []
    project = workspace / WORKSPACE_FILE
    if os.path.lexists(project):
        try:
            theirs = json_entries(project)
        except McpFileError as exc:  # the repository's file: it never stops the user's run
            (say or _stderr)(f"cleveragents: ignoring {exc}")
    seen: set[str] = set()
    user = []
    for entry in mine:
        if entry.name in seen:
            if entry.source == "--mcp":
                raise McpUsageError(f"--mcp: two servers named {entry.name!r}")
            continue
        seen.add(entry.name)
        user.append(entry)
    return user, [entry for entry in theirs if entry.name not in seen]


def servers_for_run(
    workspace: Path,
    state_dir: Path,
    flags: Sequence[str] = (),
    config_files: Sequence[Path] = (),
    *,
    ask: Callable[[Entry], bool | None] | None = None,
    say: Callable[[str], None] | None = None,
) -> tuple[McpServerConfig, ...]:
    """The servers a run in ``workspace`` starts (see the module docstring). ``ask``
    asks the user about one ``.mcp.json`` entry (``None``: nobody to ask); ``say``
    prints a line on stderr."""
    say = say or _stderr
    ask = ask or ask_on_terminal
    user, theirs = gather(workspace, flags, config_files, say=say)
    configs = [entry.config for entry in user if entry.enabled]
    if not theirs:
        return tuple(configs)
    approvals = Approvals(state_dir, workspace)
    approved = approvals.approved()
    newly: dict[str, str] = {}
    for entry in theirs:
        mark = fingerprint(entry.written)
        if approved.get(entry.name) == mark:
            configs.append(entry.config)
            continue
        answer = ask(entry)
        if answer is None:
            say(
                f"cleveragents: not starting {entry.name!r} from {entry.source}: a repository's "
                "MCP server starts only once you approve it, and there is no terminal to "
                f"ask; approve it with: cleveragents mcp approve {entry.name} --workspace "
                f"{_quoted(workspace)}"
            )
        elif answer:
            newly[entry.name] = mark
            configs.append(entry.config)
        else:
            say(f"cleveragents: not starting {entry.name!r} from {entry.source}: not approved")
    if newly:
        try:
            approvals.approve(newly)
        except OSError as exc:
            say(f"cleveragents: the approval is not remembered: {exc}")
    return tuple(configs)


def _quoted(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def _stderr(text: str) -> None:
    from .client._terminal import printable

    print(printable(text), file=sys.stderr)


def _tty() -> int | None:
    """The controlling terminal, for reading and writing; ``None`` without one."""
    try:
        return os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None


def _read_line(fd: int, limit: int = 4096) -> str:
    data = b""
    while not data.endswith(b"\n") and len(data) < limit:
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def ask_on_terminal(entry: Entry) -> bool | None:
    """Ask on the terminal whether to start one ``.mcp.json`` server; ``None`` when there
    is no terminal. Only ``y`` or ``yes`` starts it."""
    from .client._terminal import printable

    tty = _tty()
    if tty is None:
        return None
    try:
        question = (
            f"{printable(entry.source)} asks to start an MCP server, a program of the "
            f"repository's choosing that runs unconfined, as you:\n"
            f"  {printable(entry.name)}: {printable(describe(entry.config))}\n"
            "Start it, now and in later runs while this entry stays the same? [y/N] "
        )
        os.write(tty, question.encode("utf-8", "replace"))
        answer = _read_line(tty)
    except (OSError, KeyboardInterrupt):
        return False
    finally:
        os.close(tty)
    return answer.strip().lower() in ("y", "yes")


# -- cleveragents mcp list ---------------------------------------------------------------


def _workspace(flag: Path | None) -> Path:
    workspace = (flag or Path.cwd()).expanduser().resolve()
    if not workspace.is_dir():
        raise McpUsageError(f"--workspace {workspace} is not a directory")
    return workspace


def _state_dir(flag: Path | None) -> Path:
    from .client._config import ConfigError, resolve

    try:
        setting = resolve({"state_dir": str(flag) if flag else None})["state_dir"]
    except ConfigError as exc:
        raise McpUsageError(str(exc)) from None
    return Path(str(setting.value)).expanduser().resolve()


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except McpUsageError as exc:
            _stderr(f"cleveragents mcp {args.mcp_command}: {exc}")
            return 2

    return run


@_guarded
def list_command(args: argparse.Namespace) -> int:
    """Every server a run in the workspace would know, where it comes from, and for a
    ``.mcp.json`` one whether it is approved."""
    workspace = _workspace(args.workspace)
    user, theirs = gather(workspace)
    approved = Approvals(_state_dir(args.state_dir), workspace).approved()
    rows = []
    for entry in user:
        status = "enabled" if entry.enabled else "disabled (enabled = false)"
        rows.append((entry, status))
    for entry in theirs:
        ok = approved.get(entry.name) == fingerprint(entry.written)
        status = "approved" if ok else (
            "changed since approved: cleveragents mcp approve " + entry.name
            if entry.name in approved else "not approved: cleveragents mcp approve " + entry.name
        )  # fmt: skip
        rows.append((entry, status))
    if args.json:
        print(json.dumps([{"name": e.name, "transport": e.config.transport, "source": e.source,
                           "status": s, "command": e.config.command,
                           "args": list(e.config.args), "url": e.config.url,
                           "env": sorted(e.config.env), "headers": sorted(e.config.headers)}
                          for e, s in rows], indent=2))  # fmt: skip
        return 0
    from .client._terminal import printable

    if not rows:
        print(f"no MCP servers (none in {config_path()} nor in {workspace / WORKSPACE_FILE})")
        return 0
    for entry, status in rows:
        print(printable(f"{entry.name}  {describe(entry.config)}"))
        print(printable(f"    from {entry.source}; {status}"))
    return 0


# -- cleveragents mcp add / remove -------------------------------------------------------


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_string(key)


def _toml_table(values: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_string(v)}" for k, v in values.items()) + " }"


def _pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise McpUsageError(f"{flag} {item.split('=')[0]!r}...: expected NAME=VALUE")
        out[key] = value
    return out


@_guarded
def add_command(args: argparse.Namespace) -> int:
    """Append a ``[mcp_servers.NAME]`` table to ``config.toml`` (checked first)."""
    words = list(args.server_command)
    if words[:1] == ["--"]:
        words = words[1:]
    if (args.url is None) == (not words):
        raise McpUsageError(
            "give a command after -- (cleveragents mcp add git -- uvx mcp-server-git) "
            "or --url URL, not both"
        )
    if not SERVER_NAME_PATTERN.fullmatch(args.name):
        raise McpUsageError(f"the name {args.name!r} must be 1-64 letters, digits, _ or -")
    lines = [f"[mcp_servers.{args.name}]"]
    if words:
        lines += [f"command = {_toml_string(words[0])}",
                  "args = [" + ", ".join(_toml_string(w) for w in words[1:]) + "]"]  # fmt: skip
    else:
        lines.append(f"url = {_toml_string(args.url)}")
    env = _pairs(args.env, "--env")
    headers = _pairs(args.header, "--header")
    if env:
        lines.append(f"env = {_toml_table(env)}")
    if headers:
        lines.append(f"headers = {_toml_table(headers)}")
    if args.bearer_token_env_var:
        lines.append(f"bearer_token_env_var = {_toml_string(args.bearer_token_env_var)}")
    path = config_path()
    text = _read(path)
    existing = {e.name for e in _entries(path, text)}
    if args.name in existing:
        if not args.replace:
            raise McpUsageError(
                f"{path} already has mcp_servers.{args.name} (--replace replaces it)"
            )
        text = _without(path, text, args.name)
    text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + "\n".join(lines) + "\n"
    entries = _entries(path, text, check_tokens=False)
    entry = next(e for e in entries if e.name == args.name)
    _replace(path, text)
    from .client._terminal import printable

    print(printable(f"added {args.name} to {path}: {describe(entry.config)}"))
    return 0


@_guarded
def remove_command(args: argparse.Namespace) -> int:
    """Remove a ``[mcp_servers.NAME]`` table (and its sub-tables) from ``config.toml``."""
    path = config_path()
    text = _read(path)
    if args.name not in {e.name for e in _entries(path, text, check_tokens=False)}:
        raise McpUsageError(f"{path} has no mcp_servers.{args.name}")
    _replace(path, _without(path, text, args.name))
    print(f"removed {args.name} from {path}")
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise McpUsageError(f"cannot read {path}: {exc}") from None


def _entries(path: Path, text: str, check_tokens: bool = True) -> list[Entry]:
    import tomllib

    from ._mcp_files import toml_entries

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise McpUsageError(f"{path} is not valid TOML: {exc}") from None
    environ: Any = os.environ if check_tokens else _AnyToken()
    try:
        return toml_entries(data.get("mcp_servers", {}), path, environ)
    except McpFileError as exc:
        raise _usage(exc) from None


class _AnyToken(dict[str, str]):
    """An environment in which every variable is set: ``add`` checks a table's shape,
    not whether ``bearer_token_env_var`` is set in this shell."""

    def __contains__(self, key: object) -> bool:
        return True

    def get(self, key: str, default: Any = None) -> str:
        return "set"

    def __getitem__(self, key: str) -> str:
        return "set"


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def _without(path: Path, text: str, name: str) -> str:
    """``text`` without the lines of ``[mcp_servers.NAME]`` and its sub-tables."""
    own = {f"mcp_servers.{name}", f'mcp_servers."{name}"'}
    out, skipping, found = [], False, False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header is not None:
            key = re.sub(r"\s*\.\s*", ".", header.group(1))
            skipping = key in own or any(key.startswith(o + ".") for o in own)
            found = found or skipping
        if not skipping:
            out.append(line)
    result = "".join(out)
    if not found or name in {e.name for e in _entries(path, result, check_tokens=False)}:
        raise McpUsageError(
            f"{path}: mcp_servers.{name} is not written as a [mcp_servers.{name}] table; "
            "edit the file by hand"
        )
    return re.sub(r"\n{3,}", "\n\n", result)


def _replace(path: Path, text: str) -> None:
    """Replace the file atomically; a new one is 0600 (it may hold tokens)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    mode = 0o600
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode & 0o777
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


# -- cleveragents mcp approve / revoke ---------------------------------------------------


@_guarded
def approve_command(args: argparse.Namespace) -> int:
    """Approve the workspace's ``.mcp.json`` servers as they are written now: those
    named, every one with ``--all``, else each new one asked about on the terminal."""
    from .client._terminal import printable

    workspace = _workspace(args.workspace)
    _, theirs = gather(workspace)
    listed = {e.name: e for e in theirs}
    if not (workspace / WORKSPACE_FILE).is_file():
        raise McpUsageError(f"{workspace / WORKSPACE_FILE} does not exist")
    unknown = [n for n in args.names if n not in listed]
    if unknown:
        raise McpUsageError(
            f"{workspace / WORKSPACE_FILE} has no server {unknown[0]!r} that is not also "
            f"one of yours (it lists: {', '.join(listed) or 'none'})"
        )
    approvals = Approvals(_state_dir(args.state_dir), workspace)
    current = approvals.approved()
    chosen: dict[str, str] = {}
    for entry in theirs:
        mark = fingerprint(entry.written)
        if args.all or entry.name in args.names:
            chosen[entry.name] = mark
        elif not args.names and current.get(entry.name) != mark:
            answer = ask_on_terminal(entry)
            if answer is None:
                raise McpUsageError("no terminal to ask: name the servers, or pass --all")
            if answer:
                chosen[entry.name] = mark
    if chosen:
        try:
            approvals.approve(chosen)
        except OSError as exc:
            raise McpUsageError(str(exc)) from None
    for name in chosen:
        print(printable(f"approved {name}: {describe(listed[name].config)}"))
    if not chosen:
        print("nothing approved")
    return 0


@_guarded
def revoke_command(args: argparse.Namespace) -> int:
    """Forget approvals of the workspace's ``.mcp.json`` servers (all, or those named)."""
    workspace = _workspace(args.workspace)
    gone = Approvals(_state_dir(args.state_dir), workspace).revoke(args.names or None)
    print("revoked " + ", ".join(gone) if gone else "no approvals to revoke")
    return 0
