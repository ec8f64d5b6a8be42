"""Reading ACP's params where they are not just strings: directories, and
``mcpServers`` as the daemon's ``McpServerEntry``s. A bad value is an
``INVALID_PARAMS`` error that names its field (``params.mcpServers[0].url``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..protocol import RpcError, wire
from ..tool import JsonRpcCode


def invalid(field: str, problem: str) -> RpcError:
    """An ``INVALID_PARAMS`` error naming the field and what is wrong with it."""
    return RpcError(JsonRpcCode.INVALID_PARAMS, f"{field}: {problem}")


def directory(value: Any, field: str) -> str:
    """An existing directory given as an absolute path, resolved."""
    if not isinstance(value, str) or not value:
        raise invalid(field, "expected an absolute path")
    if any(ord(c) < 32 for c in value) or not os.path.isabs(value):
        raise invalid(field, "expected an absolute path without control characters")
    if not os.path.isdir(value):
        raise invalid(field, f"{value!r} is not a directory")
    return os.path.realpath(value)


def root_directory(value: Any, field: str) -> str:
    """A directory a session may have as a sandbox root: as :func:`directory`, and never
    ``/`` or the home directory, which ``cleveragents run`` refuses too: every file under
    either would be in reach of the model."""
    path = directory(value, field)
    if Path(path) in (Path("/"), Path.home().resolve()):
        raise invalid(
            field, f"refusing {path} as a session root (every file under it would be in "
            "reach of the model): open a project folder"
        )  # fmt: skip
    return path


def mcp_entries(raw: Any) -> list[wire.McpServerEntry]:
    """ACP's ``mcpServers`` as the daemon's entries: stdio ``{name, command, args, env:
    [{name, value}]}`` and ``{type: "http", name, url, headers: [{name, value}]}``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise invalid("params.mcpServers", "expected a list")
    entries = []
    for index, item in enumerate(raw):
        where = f"params.mcpServers[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise invalid(f"{where}.name", "expected a string")
        kind = item.get("type", "stdio")
        if kind == "stdio":
            if not isinstance(item.get("command"), str):
                raise invalid(f"{where}.command", "expected a string")
            args = item.get("args") or []
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise invalid(f"{where}.args", "expected a list of strings")
            entry = wire.McpServerEntry(
                item["name"], command=item["command"], args=args,
                env=_pairs(item.get("env"), f"{where}.env"),
            )  # fmt: skip
        elif kind == "http":
            if not isinstance(item.get("url"), str):
                raise invalid(f"{where}.url", "expected a string")
            headers = _pairs(item.get("headers"), f"{where}.headers")
            entry = wire.McpServerEntry(item["name"], url=item["url"], headers=headers)
        else:
            raise invalid(f"{where}.type", f"{kind!r} is not supported (stdio and http are)")
        entries.append(entry)
    return entries


def _pairs(raw: Any, field: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise invalid(field, "expected a list of {name, value}")
    out = {}
    for index, pair in enumerate(raw):
        if not (
            isinstance(pair, dict)
            and isinstance(pair.get("name"), str)
            and isinstance(pair.get("value"), str)
        ):
            raise invalid(f"{field}[{index}]", "expected {name, value} strings")
        out[pair["name"]] = pair["value"]
    return out
