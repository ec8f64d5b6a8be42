"""MCP server entries as both JSON-RPC faces receive them (LSP's
``initializationOptions.mcpServers``, ``mcp/add`` and ``run/start.mcpServers``; ACP's
session ``mcpServers``), checked and turned into ``McpServerConfig`` objects."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..mcp import McpConfigError, McpServerConfig, mcp_available
from ..protocol import ParamsError, camel, wire
from ..runs import CapabilityError

DEFAULT_TIMEOUT_MS = 120_000
DEFAULT_STARTUP_TIMEOUT_MS = 10_000
EXTRA = "pip install 'cleveragents[mcp]'"


def to_configs(
    entries: Sequence[wire.McpServerEntry], field: str, taken: Iterable[str] = ()
) -> list[McpServerConfig]:
    """Check wire entries and turn them into configs; ``ParamsError`` names the field.

    Names are unique in their scope: among ``entries`` and against ``taken``."""
    if entries and not mcp_available():
        raise CapabilityError(
            f"{field}: MCP servers need the MCP SDK, which is not installed: {EXTRA}"
        )
    seen = set(taken)
    configs = []
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        if entry.name in seen:
            raise ParamsError(
                f"{where}.name: an MCP server named {entry.name!r} is already configured"
            )
        seen.add(entry.name)
        configs.append(_config(entry, where))
    return configs


def _config(entry: wire.McpServerEntry, where: str) -> McpServerConfig:
    for name, value in (
        ("timeoutMs", entry.timeout_ms),
        ("startupTimeoutMs", entry.startup_timeout_ms),
    ):
        if value is not None and value <= 0:
            raise ParamsError(f"{where}.{name}: must be positive")
    try:
        return McpServerConfig(
            name=entry.name,
            command=entry.command,
            args=tuple(entry.args or ()),
            env=dict(entry.env or {}),
            cwd=entry.cwd,
            url=entry.url,
            headers=dict(entry.headers or {}),
            timeout_s=(entry.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000,
            startup_timeout_s=(entry.startup_timeout_ms or DEFAULT_STARTUP_TIMEOUT_MS) / 1000,
            include=tuple(entry.include) if entry.include is not None else None,
            exclude=tuple(entry.exclude) if entry.exclude is not None else None,
            protocol=entry.protocol,
            trust=entry.trust,
        )
    except McpConfigError as exc:
        field = _WIRE_FIELDS.get(exc.field, camel(exc.field))
        raise ParamsError(f"{where}.{field}: {exc.problem}") from None


_WIRE_FIELDS = {"timeout_s": "timeoutMs", "startup_timeout_s": "startupTimeoutMs"}
