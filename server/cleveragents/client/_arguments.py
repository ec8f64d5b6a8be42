"""What a caller hands the :class:`~cleveragents.client.Client`, checked where it is made.

Owns the callback types a caller supplies, the translation of ``run()``'s keywords into
``RunParams`` wire fields, the reading of a ``permission_handler``'s answer, and the
``initialize`` params of a spawn. A mistake is a ``TypeError`` that names it, raised
at the call that made it. Knows no transport.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..protocol import camel, wire
from ..tool import PERMISSION_OUTCOMES, PermissionOutcome

ToolFunction = Callable[[dict[str, Any]], Any | Awaitable[Any]]
EventCallback = Callable[[str, dict[str, Any]], None]
PermissionAnswer = str | Mapping[str, Any]
PermissionCallback = Callable[[dict[str, Any]], PermissionAnswer | Awaitable[PermissionAnswer]]
"""Answers ``permission/request`` params with an outcome or ``{"outcome": ...}``."""
ElicitationCallback = Callable[[dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]]
"""Answers ``mcp/elicit`` params (an MCP server's question) with ``{action, content?}``."""
LlmCallback = Callable[[dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]]
"""Answers ``llm/generate`` params with ``{content, toolCalls, usage?}``."""


@functools.cache
def _run_param_names() -> dict[str, str]:
    """Each ``RunParams`` field but the prompt, by its Python and its wire name -> its wire
    name: read at the first ``run()``, since a daemon imports this package to read its
    configuration before its ``initialize`` reply and needs no ``run/*`` wire type."""
    names: dict[str, str] = {}
    for field in attrs.fields(wire.RunParams):
        if field.name != "prompt":
            names[field.name] = names[camel(field.name)] = camel(field.name)
    return names


def run_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``run()``'s keywords as ``RunParams`` wire fields: Python names (``max_iterations``)
    and wire names (``maxIterations``) both; anything else is a ``TypeError``."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = _run_param_names().get(key)
        if name is None:
            raise TypeError(
                f"run() got an unexpected keyword argument {key!r}; RunParams fields are "
                + ", ".join(sorted({k for k in _run_param_names() if "_" in k or k.islower()}))
            )
        if name in out:
            raise TypeError(f"run() got {key!r} twice (as {name!r} too)")
        out[name] = value
    return out


def permission_outcome(answer: Any) -> PermissionOutcome:
    """A ``permission_handler``'s answer as an outcome: a string, or ``{"outcome": ...}``."""
    outcome = answer.get("outcome") if isinstance(answer, Mapping) else answer
    if not isinstance(outcome, str):
        raise TypeError(
            "permission_handler must return an outcome string or {'outcome': outcome}, "
            f"got {answer!r}"
        )
    for known in PERMISSION_OUTCOMES:
        if outcome == known:
            return known
    raise TypeError(
        f"permission_handler returned {outcome!r}; an outcome is one of "
        + ", ".join(sorted(PERMISSION_OUTCOMES))
    )


def initialize_params(
    folders: Sequence[Path],
    *,
    model: str | Mapping[str, Any] | None,
    automation_profile: str | None,
    permissions: bool,
    llm: bool,
    checkpoints: bool = True,
    elicitation: bool = False,
) -> dict[str, Any]:
    """``initialize``'s params: the workspace folders (the first is the root) and what
    this client lends the daemon (permission prompts, a model)."""
    options: dict[str, Any] = {}
    if model is not None:
        options["model"] = model
    if automation_profile is not None:
        options["automationProfile"] = automation_profile
    if not checkpoints:
        options["checkpoints"] = False
    return {
        "processId": os.getpid(),
        "rootUri": folders[0].as_uri(),
        "workspaceFolders": [{"uri": f.as_uri(), "name": f.name} for f in folders],
        "capabilities": {
            "experimental": {
                "cleveragents": {"permissions": permissions, "llm": llm, "elicitation": elicitation}
            }
        },
        "initializationOptions": options,
    }
