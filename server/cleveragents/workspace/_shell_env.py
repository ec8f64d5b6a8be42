"""What a command inherits from the daemon: an environment built by allow-list, and no
way into the daemon's ``/proc`` entries.

:func:`default_env` builds a command's environment from nothing: ``PATH``, ``HOME`` (the
sandbox root), ``LANG``, ``LC_*``, ``TERM`` and ``TZ``, plus the names the user passes
through (``initializationOptions.shellEnv``, checked by :func:`check_env_names`).
:func:`protect_process` makes the daemon non-dumpable, so an unconfined command cannot
read its environment (its provider keys) from ``/proc/<daemon>/environ``.
``docs/security.md`` §3 and §6 say what this does and does not protect.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections.abc import Sequence

BASE_ENV_NAMES: tuple[str, ...] = ("PATH", "LANG", "TERM", "TZ")
"""Passed through from the daemon's environment when set (with every ``LC_*``)."""

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` for commands when the daemon has none."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What a pass-through name must look like (no ``=``, no NUL, no wildcard)."""

_PR_SET_DUMPABLE = 4


def check_env_names(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a tuple, or ``ValueError`` naming the first one that is not a variable
    name (``shellEnv`` lists names, never ``NAME=value`` pairs or patterns)."""
    if isinstance(names, str):
        raise ValueError("the pass-through list must be a list of names, not one string")
    for name in names:
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an environment variable name")
    return tuple(names)


def default_env(home: str, pass_env: Sequence[str] = ()) -> dict[str, str]:
    """A command's environment: the allow-list, ``HOME=home``, then ``pass_env``.

    Built from nothing, not by removing what looks secret: a filter by name let through
    ``HTTPS_PROXY=http://user:pw@...``, ``DATABASE_URL`` and any key named freely by a
    model spec's ``apiKeyEnv``. ``HOME`` is always ``home``, even if listed in ``pass_env``.
    """
    source = os.environ
    env = {name: source[name] for name in BASE_ENV_NAMES if name in source}
    env.update({k: v for k, v in source.items() if k.startswith("LC_")})
    env.setdefault("PATH", DEFAULT_PATH)
    env.update({name: source[name] for name in pass_env if name in source})
    env["HOME"] = home
    return env


def protect_process() -> bool:
    """Make this process non-dumpable, so its children cannot read its ``/proc`` entries.

    ``prctl(PR_SET_DUMPABLE, 0)`` makes ``/proc/<pid>/environ``, ``mem``, ``fd/`` and the
    like owned by root, and refuses ``ptrace`` from the same user: an unconfined command
    then cannot read the daemon's keys from its environment. Children get their own
    dumpable flag back at ``execve``, so they work as usual. A no-op (``False``) off
    Linux and for root, whom the flag does not stop. Returns whether it was applied.
    """
    if not sys.platform.startswith("linux") or os.geteuid() == 0:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
