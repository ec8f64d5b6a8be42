"""The command line's settings: flags, then environment, then the config file.

``$XDG_CONFIG_HOME/cleveragents/config.toml`` (default ``~/.config/...``) is optional;
its top-level keys are ``model`` (a spec string), ``profile`` and ``state_dir``, and its
``[mcp_servers.NAME]`` tables (read and checked by ``cleveragents._mcp_files``). Each
setting remembers where it came from, which ``cleveragents config`` prints. A bad file
(not TOML, an unknown key, a value that is not a string) is a :class:`ConfigError`
naming the file and the key: a typo must not be silently ignored.

Knows nothing of the daemon: it resolves values, and the command passes them on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

KEYS = ("model", "profile", "state_dir")
ENV_VARS = {
    "model": "CLEVERAGENTS_MODEL",
    "profile": "CLEVERAGENTS_PROFILE",
    "state_dir": "CLEVERAGENTS_STATE_DIR",
}
FLAGS = {"model": "--model", "profile": "--profile", "state_dir": "--state-dir"}
DEFAULT_PROFILE = "supervised"
TABLES = "mcp_servers"


class ConfigError(Exception):
    """The config file cannot be used; the message names it (a usage error, exit 2)."""


@attrs.define(frozen=True)
class Setting:
    value: str | None
    source: str
    """``--flag``, ``$VARIABLE``, the config file's path, ``default`` or ``unset``."""


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "cleveragents" / "config.toml"


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """The daemon's own default (``transcripts.default_state_dir``); the command
    line always passes the state dir it resolved, so both agree whatever this says."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "cleveragents"


def load_file(path: Path) -> dict[str, str]:
    """The file's settings; ``{}`` when there is no file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    import tomllib  # only with a file to parse: no start-up without one pays for it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    out: dict[str, str] = {}
    for key, value in data.items():
        if key == TABLES:
            continue  # the MCP servers' tables: ``cleveragents._mcp_files`` checks them
        if key not in KEYS:
            known = ", ".join((*KEYS, TABLES))
            raise ConfigError(f"{path}: unknown key {key!r} (known: {known})")
        if not isinstance(value, str):
            raise ConfigError(f"{path}: {key} must be a string, got {type(value).__name__}")
        out[key] = value
    return out


def resolve(
    flags: Mapping[str, str | None],
    env: Mapping[str, str] | None = None,
    path: Path | None = None,
) -> dict[str, Setting]:
    """Each setting from the first of: its flag, its environment variable, the file, the
    default. ``flags`` maps a key to the flag's value (``None``: not given)."""
    env = os.environ if env is None else env
    path = config_path(env) if path is None else path
    from_file = load_file(path)
    defaults = {"profile": DEFAULT_PROFILE, "state_dir": str(default_state_dir(env))}
    settings: dict[str, Setting] = {}
    for key in KEYS:
        flag, variable = flags.get(key), env.get(ENV_VARS[key])
        if flag:
            settings[key] = Setting(flag, FLAGS[key])
        elif variable:
            settings[key] = Setting(variable, f"${ENV_VARS[key]}")
        elif from_file.get(key):
            settings[key] = Setting(from_file[key], str(path))
        elif key in defaults:
            settings[key] = Setting(defaults[key], "default")
        else:
            settings[key] = Setting(None, "unset")
    return settings
