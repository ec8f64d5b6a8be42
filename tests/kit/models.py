"""Scripted models and tool calls, as the daemon, the ACP face and the CLI take them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def scripted(*turns: dict[str, Any]) -> dict[str, Any]:
    """An inline scripted model spec: each turn is ``{"content": ..., "toolCalls": [...]}``."""
    return {"provider": "scripted", "script": list(turns)}


def script_file(tmp_path: Path, *turns: dict[str, Any], name: str = "turns.json") -> str:
    """The same turns written to a file, as ``--model scripted:PATH`` takes them."""
    path = tmp_path / name
    path.write_text(json.dumps(list(turns)))
    return f"scripted:{path}"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """One tool call of a scripted turn."""
    return {"name": name, "arguments": arguments}


def shell(command: str) -> dict[str, Any]:
    return call("builtin/shell", command=command)


def client_tool(name: str, description: str = "Answers from the test.") -> dict[str, Any]:
    """A client tool definition for ``tools/register``, taking any object."""
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


HANG_TOOL = client_tool("client/hang", "Never answers.")
"""A client tool the tests never answer, so a run stays in flight."""
HANG = scripted({"content": "waiting", "toolCalls": [call("client/hang")]})
"""A model whose only turn calls ``HANG_TOOL``."""
DONE = scripted({"content": "done"})
