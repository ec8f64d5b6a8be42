"""``cleveragents models`` and ``cleveragents keys set|list|remove``.

``models`` lists the known-models table (``llm.known_models``: the prefix a model's name
starts with, its provider, its context window) and whether each provider's key is
available, and from where. ``keys`` keeps keys in the stores of ``_keystore`` (the OS
keyring, else a 0600 file), by the variable they stand for. A key is read from a hidden
prompt or from stdin, never from the command line (shell history, ``ps``), and never
printed: what is shown is the variable and the store.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import re
import sys
from typing import Any

from ._keystore import Keys, KeyStoreError
from .client._terminal import printable
from .llm import Provider, known_models, providers

VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
"""A key variable named directly (a spec's own ``apiKeyEnv``)."""
EXIT_USAGE = 2


class KeysUsageError(Exception):
    """A bad argument: ``cleveragents keys: MESSAGE``, exit 2 (never holds a key)."""


def _keyed_providers() -> list[Provider]:
    return [p for p in providers() if p.key_envs]


def key_variable(name: str) -> tuple[str, str]:
    """``(variable, label)`` of ``keys set|remove NAME``: a provider's first key
    variable, or a variable named directly."""
    for provider in providers():
        if provider.name == name:
            if not provider.key_envs:
                raise KeysUsageError(f"the {name} model takes no key")
            return provider.key_envs[0], name
    if VARIABLE.fullmatch(name):
        return name, name
    names = ", ".join(p.name for p in _keyed_providers())
    raise KeysUsageError(
        f"unknown provider {printable(name)!r}: name one of {names}, or the variable a "
        "spec's apiKeyEnv names (MY_API_KEY)"
    )


def _from_env(variables: tuple[str, ...]) -> str | None:
    return next((v for v in variables if (os.environ.get(v) or "").strip()), None)


def availability(keys: Keys, variables: tuple[str, ...]) -> dict[str, Any]:
    """Where a key for these variables comes from (the environment wins), never the key:
    ``{available, source, where, stored}``; ``stored`` names the store holding one."""
    stored: str | None = None
    kind: str | None = None
    problem: str | None = None
    for variable in variables:
        try:
            found = keys.find(variable)
        except KeyStoreError as exc:
            problem = problem or str(exc)
            continue
        if found is not None:
            stored, kind = found[1].label, found[1].kind
            break
    env = _from_env(variables)
    if env is not None:
        return {"available": True, "source": "environment", "where": f"${env}",
                "stored": stored, "problem": problem}  # fmt: skip
    if stored is not None:
        return {"available": True, "source": kind, "where": stored, "stored": stored,
                "problem": problem}  # fmt: skip
    return {"available": False, "source": None, "where": None, "stored": None, "problem": problem}


def _groups() -> list[tuple[list[str], tuple[str, ...]]]:
    """The providers that read the same key variables, together: ``openai`` and
    ``openai-responses`` share ``OPENAI_API_KEY``."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for provider in _keyed_providers():
        groups.setdefault(provider.key_envs, []).append(provider.name)
    return [(names, variables) for variables, names in groups.items()]


def _report_problems(rows: list[dict[str, Any]], command: str) -> int:
    problems = list(dict.fromkeys(r["problem"] for r in rows if r.get("problem")))
    for problem in problems:
        print(printable(f"cleveragents {command}: {problem}"), file=sys.stderr)
    return 1 if problems else 0


# -- models ------------------------------------------------------------------------------


def models_command(args: argparse.Namespace) -> int:
    keys = Keys.default()
    by_provider: dict[str, dict[str, Any]] = {}
    for names, variables in _groups():
        found = availability(keys, variables)
        for name in names:
            by_provider[name] = found
    rows = []
    for model in known_models():
        key = by_provider.get(model.provider) or availability(keys, ())
        rows.append({"prefix": model.prefix, "provider": model.provider, "window": model.window,
                     "keyAvailable": key["available"], "keySource": key["where"],
                     "problem": key["problem"]})  # fmt: skip
    if args.json:
        shown = [{k: v for k, v in row.items() if k != "problem"} for row in rows]
        print(json.dumps({"models": shown}, indent=2))
        return _report_problems(rows, "models")
    table = [["MODEL", "PROVIDER", "WINDOW", "KEY"]] + [
        [f"{r['prefix']}*", r["provider"], f"{r['window']:,}",
         f"yes ({r['keySource']})" if r["keyAvailable"] else "no"]
        for r in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[3]]))  # the widest window still leaves two spaces
    print(
        "\n-m NAME takes a name starting with a prefix above (-m gpt-4o is openai:gpt-4o); "
        "any other model is named with its provider (openai:NAME). A key: set its "
        "variable, or cleveragents keys set PROVIDER."
    )
    return _report_problems(rows, "models")


# -- keys --------------------------------------------------------------------------------


def keys_command(args: argparse.Namespace) -> int:
    try:
        if args.keys_command == "set":
            return _set(args)
        if args.keys_command == "remove":
            return _remove(args)
        return _list(args)
    except KeysUsageError as exc:
        print(f"cleveragents keys {args.keys_command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyStoreError as exc:
        print(printable(f"cleveragents keys {args.keys_command}: {exc}"), file=sys.stderr)
        return 1


def _set(args: argparse.Namespace) -> int:
    if args.extra:
        raise KeysUsageError(
            "a key is never taken on the command line (it would stay in your shell's history "
            "and show in ps): run it without the key and paste it at the hidden prompt, or "
            "pipe it in: cleveragents keys set PROVIDER < file"
        )
    variable, label = key_variable(args.provider)
    key = read_key(f"{variable} for {label} (input hidden): ")
    keys = Keys.default()
    store = keys.set(variable, key)
    print(printable(f"stored the key for {label} ({variable}) in the {store.label}"))
    if _from_env((variable,)) is not None:
        print(f"note: ${variable} is set here, and wins over the stored key while it is",
              file=sys.stderr)  # fmt: skip
    return 0


def read_key(prompt: str) -> str:
    """The key: at a hidden prompt on the terminal, else the one line on stdin."""
    stdin = sys.stdin
    interactive = False
    with contextlib.suppress(OSError, ValueError, AttributeError):
        interactive = stdin is not None and stdin.isatty()
    if interactive:
        try:
            raw = getpass.getpass(prompt)
        except EOFError:
            raw = ""
        lines = [raw]
    else:
        data = stdin.buffer.read(1 << 16) if stdin is not None else b""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise KeysUsageError("the key on stdin is not UTF-8 text") from None
        lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].strip():
        raise KeysUsageError(
            "no key given: paste it at the prompt, or pipe it in (cleveragents keys set "
            "PROVIDER < file)"
        )
    if len(lines) > 1:
        raise KeysUsageError(f"expected the key alone on stdin, got {len(lines)} lines")
    key = lines[0].strip()
    if any(ch.isspace() or not ch.isprintable() for ch in key):
        raise KeysUsageError("the key holds spaces or control characters: is it a key?")
    return key


def _remove(args: argparse.Namespace) -> int:
    variable, label = key_variable(args.provider)
    removed = Keys.default().remove(variable)
    if not removed:
        print(f"cleveragents keys remove: no key is stored for {label} ({variable})",
              file=sys.stderr)  # fmt: skip
        return 1
    where = " and the ".join(store.label for store in removed)
    print(printable(f"removed the key for {label} ({variable}) from the {where}"))
    if _from_env((variable,)) is not None:
        print(f"note: ${variable} is still set here", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    keys = Keys.default()
    rows = []
    known: set[str] = set()
    for names, variables in _groups():
        known.update(variables)
        rows.append({"providers": names, "variables": list(variables),
                     **availability(keys, variables)})  # fmt: skip
    for store in keys.stores:  # keys kept for a spec's own apiKeyEnv
        variables_of = getattr(store, "variables", None)
        if variables_of is None:
            continue
        with contextlib.suppress(KeyStoreError):
            for variable in sorted(variables_of() - known):
                known.add(variable)
                rows.append({"providers": [], "variables": [variable],
                             **availability(keys, (variable,))})  # fmt: skip
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "problem"} for r in rows], indent=2))
        return _report_problems(rows, "keys list")
    table = [["PROVIDER", "VARIABLE", "KEY FROM"]]
    for row in rows:
        where = row["where"] or "-"
        if row["source"] == "environment" and row["stored"]:
            where += f" (wins over the one in the {row['stored']})"
        table.append([", ".join(row["providers"]) or "-", " or ".join(row["variables"]), where])
    widths = [max(len(row[i]) for row in table) for i in range(2)]
    for line in table:
        print(printable(f"{line[0].ljust(widths[0])}  {line[1].ljust(widths[1])}  {line[2]}"))
    print(f"\nnew keys go to the {keys.preferred.label}")
    return _report_problems(rows, "keys list")
