"""From an MCP server's tool listing to ``ToolSpec``s, and from a ``tools/call`` result
to a record's output. Pure functions on wire dicts: no SDK, no I/O.

Names are ``mcp:SERVER/TOOL``, so two servers' same-named tools never collide. A tool
whose name or ``inputSchema`` the core cannot take is skipped with a reason, never
fatal for the server. The kind that feeds the automation profile is ``read`` only for
``readOnlyHint: true``; the server entry's ``trust`` overrides it. A tool's
``outputSchema`` is deliberately not put on the spec (the runner would fail a record
whose output does not match): :func:`output_checks` builds a spec of its own for it,
used only to check answers, and the server only logs a mismatch.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from cleveragents.tool import (
    RESERVED_INPUT_KEYS,
    TOOL_NAME_PATTERN,
    InvalidToolNameError,
    SchemaDefinitionError,
    ToolAnnotations,
    ToolCallContext,
    ToolKind,
    ToolSpec,
)

from ._config import McpServerConfig, Trust
from ._link import RawResult, WireTool

MAX_TOOLS = 1000
"""Tools kept from one server's listing; a listing stops there (each tool's schemas are
compiled, and a server is not trusted to list a reasonable number)."""

ToolCaller = Callable[[str, dict[str, Any], ToolCallContext], Awaitable[Any]]
"""``call(mcp_tool_name, arguments, call)``: what a spec's handler awaits."""


def full_name(server: str, tool: str) -> str:
    return f"mcp:{server}/{tool}"


def selected(tool: str, include: Sequence[str] | None, exclude: Sequence[str] | None) -> bool:
    """Whether ``include``/``exclude`` (names or globs, case-sensitive) keep ``tool``."""
    if include is not None and not any(fnmatch.fnmatchcase(tool, p) for p in include):
        return False
    return not (exclude is not None and any(fnmatch.fnmatchcase(tool, p) for p in exclude))


def kind_of(
    hints: Mapping[str, Any] | None, trust: Trust | None
) -> tuple[ToolKind, ToolAnnotations]:
    """The kind and annotations of a tool from its MCP annotations and the entry's trust.

    Only explicit ``true`` hints count. ``trust`` wins, and the annotations follow it so
    the profile does not read a trusted tool as destructive."""
    hints = hints or {}
    read_only = hints.get("readOnlyHint") is True
    destructive = hints.get("destructiveHint") is True
    idempotent = hints.get("idempotentHint") is True
    if trust is not None:
        read_only = trust == "read"
        destructive = destructive and not read_only
        return trust, ToolAnnotations(read_only, destructive, idempotent)
    return ("read" if read_only else "write"), ToolAnnotations(read_only, destructive, idempotent)


def build_specs(
    config: McpServerConfig, tools: Sequence[WireTool], call: ToolCaller
) -> tuple[list[ToolSpec], list[str]]:
    """The specs of the selected tools, and a ``"TOOL: reason"`` line per skipped tool."""
    specs: list[ToolSpec] = []
    skipped: list[str] = []
    seen: set[str] = set()
    if len(tools) > MAX_TOOLS:
        skipped.append(f"the {len(tools) - MAX_TOOLS} tools after the first {MAX_TOOLS}: "
                       f"a server may list at most {MAX_TOOLS}")  # fmt: skip
    for tool in tools[:MAX_TOOLS]:
        name = tool.get("name")
        if not isinstance(name, str):
            skipped.append(f"{name!r}: the tool has no name")
            continue
        if not selected(name, config.include, config.exclude):
            continue
        reason = _problem(config.name, name, tool, seen)
        if reason is None:
            try:
                specs.append(_spec(config, name, tool, call))
            except (SchemaDefinitionError, InvalidToolNameError, ValueError) as exc:
                reason = f"its inputSchema is not usable: {exc}"
        if reason is not None:
            skipped.append(f"{name}: {reason}")
        seen.add(name)
    return specs, skipped


def _problem(server: str, name: str, tool: WireTool, seen: set[str]) -> str | None:
    if name in seen:
        return "the server lists this name twice; the first one is kept"
    if not TOOL_NAME_PATTERN.fullmatch(full_name(server, name)):
        return (
            f"{full_name(server, name)!r} is not a valid tool name "
            f"(names match {TOOL_NAME_PATTERN.pattern})"
        )
    if not isinstance(tool.get("inputSchema"), Mapping):
        return "its inputSchema is not an object"
    return None


def _spec(config: McpServerConfig, name: str, tool: WireTool, call: ToolCaller) -> ToolSpec:
    annotations = tool.get("annotations")
    kind, hints = kind_of(annotations if isinstance(annotations, Mapping) else None, config.trust)
    description = tool.get("description") or tool.get("title") or ""
    metadata: dict[str, Any] = {"source": "mcp", "server": config.name, "mcp_tool": name}
    if isinstance(tool.get("title"), str):
        metadata["title"] = tool["title"]
    if isinstance(tool.get("outputSchema"), Mapping):
        metadata["output_schema"] = tool["outputSchema"]
    return ToolSpec(
        full_name(config.name, name),
        description if isinstance(description, str) else "",
        tool["inputSchema"],
        _handler(name, call),
        annotations=hints,
        timeout_s=None,  # McpServer.call_tool enforces the entry's timeout itself
        kind=kind,
        metadata=metadata,
    )


def _handler(
    tool: str, call: ToolCaller
) -> Callable[[dict[str, Any], ToolCallContext], Awaitable[Any]]:
    async def call_mcp_tool(inputs: dict[str, Any], context: ToolCallContext) -> Any:
        # The runner adds the reserved context keys (sandbox_root...): they are the
        # daemon's, not the model's, and never go to an outside server.
        arguments = {k: v for k, v in inputs.items() if k not in RESERVED_INPUT_KEYS}
        return await call(tool, arguments, context)

    return call_mcp_tool


def output_checks(
    server: str, tools: Sequence[WireTool]
) -> tuple[dict[str, ToolSpec | None], list[str]]:
    """Per tool that declares an ``outputSchema``, a spec that only checks answers against
    it (``validate_output`` raises ``ToolOutputError``); ``None`` for a schema that
    cannot be compiled or a name that is not a valid tool name, with a ``"TOOL: reason"``
    line for a schema refused (its answers are then used unchecked)."""
    checks: dict[str, ToolSpec | None] = {}
    unchecked: list[str] = []
    for tool in tools[:MAX_TOOLS]:
        name, schema = tool.get("name"), tool.get("outputSchema")
        if isinstance(name, str) and isinstance(schema, Mapping):
            try:
                checks[name] = ToolSpec(
                    full_name(server, name), "", _ANY_INPUT, _never_called, output_schema=schema
                )
            except SchemaDefinitionError as exc:
                checks[name] = None
                unchecked.append(f"{name}: its outputSchema is not usable: {exc}")
            except InvalidToolNameError:
                checks[name] = None
    return checks, unchecked


_ANY_INPUT: dict[str, Any] = {"type": "object"}


def _never_called(inputs: dict[str, Any]) -> Any:
    raise AssertionError("an output check is never called")


def output_of(result: RawResult) -> Any:
    """The record output: ``structuredContent`` when present, else the text of a single
    text block, else the content blocks as they came."""
    if result.structured is not None:
        return result.structured
    content = result.content
    if len(content) == 1 and content[0].get("type") == "text":
        text = content[0].get("text")
        return text if isinstance(text, str) else ""
    return list(content)


def error_text(result: RawResult) -> str:
    """The server's words for an ``isError`` result: its text blocks, else its content
    as JSON, else a generic sentence."""
    texts = [
        block["text"]
        for block in result.content
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    ]
    if texts:
        return "\n".join(texts)
    if result.content:
        return json.dumps(result.content, ensure_ascii=False)
    if result.structured is not None:
        return json.dumps(result.structured, ensure_ascii=False, default=str)
    return "the tool reported an error without saying what it was"
