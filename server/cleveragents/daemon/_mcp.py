"""MCP servers in the daemon: where each is configured, and its tools in the registries.

The MCP protocol is ``cleveragents.mcp``'s. This module maps the wire entries
(``initializationOptions.mcpServers``, ``mcp/add``, ``run/start.mcpServers``) to
``McpServer`` objects, registers each server's tools (``mcp:SERVER/TOOL``) in the right
registry layer (the shared one for daemon-wide servers, the run's own for run-scoped
ones), keeps them current when a server's list changes (``tools/changed``), and reports
``mcp/servers``. A server that fails never fails the daemon or a run: its status says why.

Servers are code the client chose to run, started unconfined. Their environment is the
shell's allow-list (never the daemon's own, so provider keys stay out) plus their ``env``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from ..mcp import McpConfigError, McpServer, McpServerConfig, mcp_available
from ..protocol import ParamsError, camel, dumps, unstructure, wire
from ..protocol import methods as m
from ..tool import ToolNotFoundError, ToolRegistry
from ._errors import CapabilityError
from ._peer import Peer

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 120_000
DEFAULT_STARTUP_TIMEOUT_MS = 10_000
EXTRA = "pip install 'cleveragents[mcp]'"

Scope = Literal["daemon", "run"]


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


class McpServers:
    """A set of MCP servers of one scope, whose tools live in one registry layer."""

    def __init__(
        self,
        scope: Scope,
        layer: ToolRegistry,
        log_dir: Callable[[], Path],
        env: Callable[[], Mapping[str, str]],
        cwd: Callable[[], str | None],
        on_changed: Callable[[str], None] | None = None,
    ) -> None:
        self.scope: Scope = scope
        self.layer = layer
        self._log_dir = log_dir
        self._env = env
        self._cwd = cwd
        self._on_changed = on_changed
        self.servers: dict[str, McpServer] = {}
        self._tools: dict[str, list[str]] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}

    def start(self, configs: Sequence[McpServerConfig]) -> list[str]:
        """Start each server in the background; its tools appear once it is ready."""
        for config in configs:
            server = McpServer(
                config, scope=self.scope, log_dir=self._log_dir(), base_env=self._env(),
                default_cwd=self._cwd(), on_tools_changed=self._changed,
            )  # fmt: skip
            self.servers[config.name] = server
            server.start()
            self._watchers[config.name] = asyncio.ensure_future(self._when_ready(server))
        return [config.name for config in configs]

    async def _when_ready(self, server: McpServer) -> None:
        await server.wait_ready()
        self._changed(server, settled=True)

    def _changed(self, server: McpServer, settled: bool = False) -> None:
        """(Re)register a server's tools: the names it no longer has go, new ones come.

        ``tools/changed`` goes out when they did, and once when the server first settles
        (ready or failed), so an editor learns of a failure without polling."""
        name = server.config.name
        if self.servers.get(name) is not server:
            return  # removed meanwhile
        # Kept while the server is down: a call is what restarts it.
        specs = server.tool_specs()
        old = set(self._tools.get(name, ()))
        new = {spec.name for spec in specs}
        for gone in old - new:
            if self.layer.owns(gone):
                self.layer.unregister(gone)
        for spec in specs:
            self.layer.register(spec, replace=True)
        self._tools[name] = sorted(new)
        if (settled or old != new) and self._on_changed is not None:
            self._on_changed(name)

    async def wait_ready(self) -> None:
        """Wait for the servers still starting, each at most its startup timeout, and for
        their tools to be registered."""
        watchers = [w for w in self._watchers.values() if not w.done()]
        if watchers:
            await asyncio.wait(watchers)

    async def remove(self, names: Sequence[str]) -> list[str]:
        unknown = [n for n in names if n not in self.servers]
        if unknown:
            raise ToolNotFoundError(f"no MCP server named {unknown[0]!r}")
        for name in names:
            server = self.servers.pop(name)
            watcher = self._watchers.pop(name, None)
            if watcher is not None:
                watcher.cancel()
            for tool in self._tools.pop(name, ()):
                if self.layer.owns(tool):
                    self.layer.unregister(tool)
            await server.stop()
            if self._on_changed is not None:
                self._on_changed(name)
        return list(names)

    async def close(self) -> None:
        """Stop every server (the run ended, or the daemon is stopping)."""
        for watcher in self._watchers.values():
            watcher.cancel()
        servers = list(self.servers.values())
        if servers:
            await asyncio.gather(*(s.stop() for s in servers), return_exceptions=True)

    def statuses(self) -> list[wire.McpServerStatus]:
        return [
            _status(server, len(self._tools.get(name, ()))) for name, server in self.servers.items()
        ]


def _status(server: McpServer, tool_count: int) -> wire.McpServerStatus:
    return wire.McpServerStatus(
        server.config.name, server.scope, server.config.transport,
        server.status, tool_count, server.protocol_version, server.error, server.stderr_tail(),
    )  # fmt: skip


def tools_changed(peer: Peer) -> Callable[[str], None]:
    """The ``tools/changed`` notification of one server's tools, for an editor's view."""

    def notify(server: str) -> None:
        peer.notify_json(
            m.TOOLS_CHANGED, dumps(unstructure(wire.ToolsChangedNotification("mcp", server)))
        )

    return notify
