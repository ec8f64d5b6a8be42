"""MCP server entries the command line reads: ``config.toml``'s ``[mcp_servers.NAME]``
tables, ``.mcp.json`` files (``{"mcpServers": {...}}``, as Claude Code writes them, for
a workspace's own and for ``--mcp-config FILE``) and ``--mcp 'NAME=COMMAND ARGS'``.

Each becomes an :class:`Entry`: the checked ``McpServerConfig``, where it came from,
and the entry exactly as written (its :func:`fingerprint` is what a ``.mcp.json``
approval remembers). Every problem is a :class:`McpFileError` naming the file and the
key (``config.toml: mcp_servers.git.args: must be a list of strings``): a typo must not
be silently ignored. Values are never echoed for ``env`` and ``headers``: they may hold
tokens.

The tables take Codex's keys where they mean the same (``command``, ``args``, ``env``,
``env_vars``, ``cwd``, ``url``, ``http_headers``, ``env_http_headers``,
``bearer_token_env_var``, ``startup_timeout_sec``, ``tool_timeout_sec``, ``enabled``,
``enabled_tools``, ``disabled_tools``, ``oauth``) and ours (``headers``, ``include``,
``exclude``, ``trust``, ``protocol``). Nothing here starts a server or asks anyone.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .mcp import SERVER_NAME_PATTERN, McpConfigError, McpServerConfig
from .mcp import _config as mcp_config

MAX_JSON_BYTES = 1024 * 1024
"""The largest ``.mcp.json`` read: a repository's file is not trusted to be small."""

TOML_KEYS = (
    "command", "args", "env", "env_vars", "cwd", "url", "headers", "http_headers",
    "env_http_headers", "bearer_token_env_var", "startup_timeout_sec", "tool_timeout_sec",
    "enabled", "enabled_tools", "disabled_tools", "include", "exclude", "trust", "protocol",
    "oauth",
)  # fmt: skip
JSON_KEYS = ("type", "command", "args", "env", "cwd", "url", "headers")


class McpFileError(Exception):
    """An MCP entry that cannot be used; the message names its file and key."""


@attrs.frozen
class Entry:
    """One server and where it came from."""

    config: McpServerConfig
    source: str
    """``config.toml``'s path, a ``.mcp.json``'s path, or ``--mcp``."""
    written: Mapping[str, Any] = attrs.field(repr=False, hash=False)
    """The entry exactly as its file held it (what an approval is of)."""
    enabled: bool = True

    @property
    def name(self) -> str:
        return self.config.name


def fingerprint(written: Mapping[str, Any]) -> str:
    """What a ``.mcp.json`` approval remembers: the SHA-256 of the entry as written
    (command, args, env, url, headers...), so any change to it asks again. Only the hash
    is kept, never the values."""
    text = json.dumps(written, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    import hashlib  # loaded at first use: cleveragents serve never needs it

    return hashlib.sha256(text.encode()).hexdigest()


def describe(config: McpServerConfig) -> str:
    """A server in one line for people: its command and arguments (quoted as a shell
    would) or its URL, and the names (never the values) of its env and headers."""
    if config.command is not None:
        text = shlex.join([config.command, *config.args])
    else:
        text = str(config.url)
    if config.env:
        text += f"  (env: {', '.join(sorted(config.env))})"
    if config.headers:
        text += f"  (headers: {', '.join(sorted(config.headers))})"
    return text


# -- config.toml -------------------------------------------------------------------------


def toml_entries(
    tables: object, path: Path | str, environ: Mapping[str, str] | None = None
) -> list[Entry]:
    """``config.toml``'s ``mcp_servers`` value (a table of tables) as entries, disabled
    ones included (``enabled = false``: listed, never started)."""
    environ = os.environ if environ is None else environ
    if not isinstance(tables, dict):
        raise McpFileError(f"{path}: mcp_servers must be a table of [mcp_servers.NAME] tables")
    entries = []
    for name, table in tables.items():
        where = f"{path}: mcp_servers.{name}"
        if not isinstance(table, dict):
            raise McpFileError(f"{where}: must be a table ([mcp_servers.{name}])")
        entries.append(_toml_entry(name, table, where, str(path), environ))
    return entries


def _toml_entry(
    name: str, table: dict[str, Any], where: str, source: str, environ: Mapping[str, str]
) -> Entry:
    unknown = [key for key in table if key not in TOML_KEYS]
    if unknown:
        raise McpFileError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(TOML_KEYS)})")
    fields: dict[str, Any] = {"name": name}
    for key in ("command", "cwd", "url", "trust", "protocol"):
        if key in table:
            fields[key] = _string(table[key], f"{where}.{key}")
    if "args" in table:
        fields["args"] = _strings(table["args"], f"{where}.args")
    env = dict(_string_table(table.get("env", {}), f"{where}.env"))
    for variable in _strings(table.get("env_vars", []), f"{where}.env_vars"):
        if variable in environ:
            env.setdefault(variable, environ[variable])
    if env:
        fields["env"] = env
    headers = dict(_string_table(table.get("headers", {}), f"{where}.headers"))
    headers.update(_string_table(table.get("http_headers", {}), f"{where}.http_headers"))
    for header, variable in _string_table(
        table.get("env_http_headers", {}), f"{where}.env_http_headers"
    ).items():
        if variable in environ:
            headers[header] = environ[variable]
    if "bearer_token_env_var" in table:
        variable = _string(table["bearer_token_env_var"], f"{where}.bearer_token_env_var")
        token = environ.get(variable)
        if not token:
            raise McpFileError(
                f"{where}.bearer_token_env_var: ${variable} is not set in the environment"
            )
        headers["Authorization"] = f"Bearer {token}"
    if headers:
        fields["headers"] = headers
    for key, field in (("startup_timeout_sec", "startup_timeout_s"),
                       ("tool_timeout_sec", "timeout_s")):  # fmt: skip
        if key in table:
            fields[field] = _seconds(table[key], f"{where}.{key}")
    for key, field in (("enabled_tools", "include"), ("include", "include"),
                       ("disabled_tools", "exclude"), ("exclude", "exclude")):  # fmt: skip
        if key in table:
            fields[field] = _strings(table[key], f"{where}.{key}")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise McpFileError(f"{where}.enabled: must be true or false")
    if "oauth" in table:
        fields["oauth"] = _oauth(table["oauth"], f"{where}.oauth", name, environ)
    return Entry(_build(fields, where, _TOML_FIELD_KEYS), source, table, enabled)


_TOML_FIELD_KEYS = {"timeout_s": "tool_timeout_sec", "startup_timeout_s": "startup_timeout_sec"}


def _oauth(value: object, where: str, name: str, environ: Mapping[str, str]) -> object:
    """The ``oauth`` table, its client secrets from the environment when it gives none
    (``CLEVERAGENTS_MCP_SECRET_<NAME>``, ``CLEVERAGENTS_MCP_IDP_SECRET_<NAME>``), as on
    the wire: a secret kept out of the file."""
    oauth_class: Any = getattr(mcp_config, "OAuthConfig", None)
    if oauth_class is None:
        raise McpFileError(f"{where}: OAuth is not supported by this version")
    if not isinstance(value, dict):
        raise McpFileError(f"{where}: must be a table ([...oauth])")
    known = [field.name for field in attrs.fields(oauth_class)]
    unknown = [key for key in value if key not in known]
    if unknown:
        raise McpFileError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(known)})")
    value = dict(value)
    secret = environ.get(mcp_config.secret_variable(name))
    if secret and "client_id" in value and not {"client_secret", "private_key_file"} & set(value):
        value["client_secret"] = secret
    idp = value.get("idp")
    idp_secret = environ.get(mcp_config.idp_secret_variable(name))
    if isinstance(idp, dict) and idp_secret and "client_secret" not in idp:
        value["idp"] = {**idp, "client_secret": idp_secret}
    try:
        return oauth_class(**value)
    except McpConfigError as exc:
        raise McpFileError(f"{where.rpartition('.oauth')[0]}.{exc.field}: {exc.problem}") from None
    except TypeError as exc:
        raise McpFileError(f"{where}: {exc}") from None


# -- .mcp.json and --mcp-config ----------------------------------------------------------


def json_entries(path: Path) -> list[Entry]:
    """A ``.mcp.json``-shaped file's servers (``{"mcpServers": {NAME: {...}}}``).

    ``type`` is ``stdio`` or ``http`` (streamable HTTP; ``sse`` is refused, as the older
    transport we do not speak). ``${VAR}`` is not expanded: a repository's file must not
    send the user's variables to a URL of its choosing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise McpFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # a FIFO is never waited on
            raise McpFileError(f"{path}: not a regular file")
        data = handle.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise McpFileError(f"{path}: larger than {MAX_JSON_BYTES} bytes")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise McpFileError(f"{path}: not JSON ({str(exc)[:200]})") from None
    if not isinstance(document, dict) or not isinstance(document.get("mcpServers"), dict):
        raise McpFileError(f'{path}: expected {{"mcpServers": {{"NAME": {{...}}}}}}')
    entries = []
    for name, entry in document["mcpServers"].items():
        where = f"{path}: mcpServers.{name}"
        if not isinstance(entry, dict):
            raise McpFileError(f"{where}: must be an object")
        entries.append(_json_entry(name, entry, where, str(path)))
    return entries


def _json_entry(name: str, entry: dict[str, Any], where: str, source: str) -> Entry:
    unknown = [key for key in entry if key not in JSON_KEYS]
    if unknown:
        raise McpFileError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(JSON_KEYS)})")
    kind = entry.get("type", "http" if "url" in entry else "stdio")
    if kind not in ("stdio", "http"):
        raise McpFileError(
            f"{where}.type: {kind!r} is not supported (stdio, or http for streamable HTTP)"
        )
    fields: dict[str, Any] = {"name": name}
    for key in ("command", "cwd", "url"):
        if key in entry:
            fields[key] = _string(entry[key], f"{where}.{key}")
    if "args" in entry:
        fields["args"] = _strings(entry["args"], f"{where}.args")
    for key in ("env", "headers"):
        if key in entry:
            fields[key] = _string_table(entry[key], f"{where}.{key}")
    if kind == "stdio" and "command" not in fields:
        raise McpFileError(f"{where}.command: a stdio server needs its command")
    if kind == "http" and "url" not in fields:
        raise McpFileError(f"{where}.url: an http server needs its url")
    return Entry(_build(fields, where, {}), source, entry)


# -- --mcp -------------------------------------------------------------------------------


def flag_entry(text: str, flag: str = "--mcp") -> Entry:
    """``--mcp 'NAME=COMMAND ARGS...'`` (split as a POSIX shell would: quote an argument
    with spaces) or ``--mcp NAME=URL`` for a streamable HTTP server."""
    name, sep, rest = text.partition("=")
    where = f"{flag} {text!r}"
    if not sep or not name:
        raise McpFileError(f"{where}: expected NAME=COMMAND [ARGS...] or NAME=URL")
    if not SERVER_NAME_PATTERN.fullmatch(name):
        raise McpFileError(f"{where}: the name {name!r} must be 1-64 letters, digits, _ or -")
    if rest.strip().startswith(("http://", "https://")) and len(rest.split()) == 1:
        fields: dict[str, Any] = {"name": name, "url": rest.strip()}
    else:
        try:
            words = shlex.split(rest)
        except ValueError as exc:
            raise McpFileError(f"{where}: {exc}") from None
        if not words:
            raise McpFileError(f"{where}: no command after {name}=")
        fields = {"name": name, "command": words[0], "args": words[1:]}
    return Entry(_build(fields, where, {}), flag, {k: v for k, v in fields.items() if k != "name"})


# -- shared ------------------------------------------------------------------------------


def _build(fields: dict[str, Any], where: str, names: Mapping[str, str]) -> McpServerConfig:
    try:
        return McpServerConfig(**fields)
    except McpConfigError as exc:
        if exc.field == "name":
            raise McpFileError(f"{where}: the name {exc.problem}") from None
        raise McpFileError(f"{where}.{names.get(exc.field, exc.field)}: {exc.problem}") from None


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise McpFileError(f"{where}: must be a string, not {_kind(value)}")
    return value


def _strings(value: object, where: str) -> list[str]:
    if isinstance(value, str):
        raise McpFileError(
            f"{where}: must be a list of strings, not one string: give each item on its own, "
            'e.g. ["-y", "some-server"]'
        )
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise McpFileError(f"{where}: must be a list of strings")
    return value


def _string_table(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise McpFileError(f"{where}: must be a table of strings, not {_kind(value)}")
    for key, item in value.items():
        if not isinstance(item, str):
            raise McpFileError(f"{where}.{key}: must be a string, not {_kind(item)}")
    return value


def _seconds(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise McpFileError(f"{where}: must be a number of seconds")
    if value <= 0:
        raise McpFileError(f"{where}: must be more than 0 seconds")
    return float(value)


def _kind(value: object) -> str:
    return {str: "a string", int: "a number", float: "a number", bool: "a boolean",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)  # fmt: skip


def read_toml_servers(path: Path, environ: Mapping[str, str] | None = None) -> list[Entry]:
    """``config.toml``'s servers (``[]`` when there is no file or no table)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise McpFileError(f"cannot read {path}: {exc}") from None
    import tomllib  # only with a file to parse: no start-up without one pays for it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise McpFileError(f"{path} is not valid TOML: {exc}") from None
    if "mcp_servers" not in data:
        return []
    return toml_entries(data["mcp_servers"], path, environ)
