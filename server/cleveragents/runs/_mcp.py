"""MCP servers of the run service: a pool of one scope whose tools live in one registry
layer, kept current when a server's list changes.

The MCP protocol is ``cleveragents.mcp``'s; the faces turn their wire entries into
``McpServerConfig`` objects. A server that fails never fails the service or a run: its
status says why. Servers are code the client chose to run, started unconfined; their
environment (:func:`server_env`) is the shell's allow-list with the user's real ``HOME``
and the CA and proxy variables (never the process's own environment, so provider keys
stay out), plus their ``env``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from ..mcp import NO_HOOKS, ClientHooks, McpServerConfig, TokenStore
from ..tool import ToolNotFoundError, ToolRegistry
from ..workspace.shell import default_env

if TYPE_CHECKING:
    from ..mcp import McpServer

Scope = Literal["daemon", "run"]

_NETWORK_BASES = (
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
)  # fmt: skip
NETWORK_ENV_NAMES: tuple[str, ...] = tuple(
    name for base in _NETWORK_BASES for name in (base, base.lower())
)
"""What a server that downloads (``npx``, ``uvx``) or calls out needs beyond the shell's
allow-list: a corporate CA, a proxy. Passed when set in the process's environment."""


def server_env(pass_env: Sequence[str] = ()) -> dict[str, str]:
    """A stdio MCP server's base environment: the shell's allow-list (``PATH``, ``LANG``,
    ``LC_*``, ``TERM``, ``TZ``, then ``pass_env``), the user's real ``HOME``, and
    :data:`NETWORK_ENV_NAMES`.

    ``HOME`` is the user's, not the workspace (the shell's): servers are not confined, so
    a workspace ``HOME`` bought no safety and left ``npx``'s and ``uvx``'s caches
    (``.npm/``, ``.cache/``, ``.local/``) in the user's project. Built by allow-list
    like the shell's, so provider keys and anything else of the process's stay out.
    """
    home = os.environ.get("HOME") or os.path.expanduser("~")
    env = default_env(home, pass_env)
    env.update({name: os.environ[name] for name in NETWORK_ENV_NAMES if name in os.environ})
    env["HOME"] = home
    return env


@attrs.frozen
class McpServerState:
    """How one MCP server is doing (``mcp/servers`` on the LSP wire)."""

    name: str
    scope: str
    transport: str
    status: str
    tool_count: int
    protocol_version: str | None
    error: str | None
    stderr_tail: str | None
    authorization_url: str | None = None
    """While ``needsAuth``: the URL to open to sign in."""


class McpServers:
    """A set of MCP servers of one scope, whose tools live in one registry layer."""

    def __init__(
        self,
        scope: Scope,
        layer: ToolRegistry,
        log_dir: Path,
        env: Mapping[str, str],
        cwd: str | None,
        on_changed: Callable[[str], None] | None = None,
        tokens: TokenStore | None = None,
        on_authorize: Callable[[McpServer], None] | None = None,
        hooks: ClientHooks = NO_HOOKS,
    ) -> None:
        self.scope: Scope = scope
        self.hooks = hooks
        """What the servers' elicitations, roots and progress go to."""
        self._tokens = tokens
        self._on_authorize = on_authorize
        layer.explain_missing(self._why_missing)
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
        from ..mcp import McpServer  # its connection's modules load with the first server

        for config in configs:
            server = McpServer(
                config, scope=self.scope, log_dir=self._log_dir, base_env=self._env,
                default_cwd=self._cwd, on_tools_changed=self._changed,
                tokens=self._tokens, on_authorize=self._on_authorize, hooks=self.hooks,
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

        ``on_changed`` is told when they did, and once when the server first settles
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

    def _why_missing(self, tool: str) -> str | None:
        """A call of ``mcp:SERVER/...`` whose server has no such tool now: the server's
        status and error, when it is not ready."""
        if not tool.startswith("mcp:"):
            return None
        server = self.servers.get(tool[4:].partition("/")[0])
        if server is None or server.status == "ready":
            return None
        return server.failure_text()

    async def login(self, name: str) -> McpServer:
        """Start the sign-in of server ``name`` again (see ``McpServer.login``)."""
        server = self._named(name)
        await server.login()
        return server

    async def logout(self, name: str) -> McpServer:
        """Forget server ``name``'s tokens and disconnect it (see ``McpServer.logout``)."""
        server = self._named(name)
        await server.logout()
        self._changed(server, settled=True)
        return server

    def _named(self, name: str) -> McpServer:
        server = self.servers.get(name)
        if server is None:
            raise ToolNotFoundError(f"no MCP server named {name!r}")
        return server

    async def roots_changed(self) -> None:
        """The roots changed: each live server is told (``roots/list_changed``)."""
        servers = list(self.servers.values())
        if servers:
            await asyncio.gather(*(server.roots_changed() for server in servers))

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
        """Stop every server (the run ended, or the service is closing)."""
        for watcher in self._watchers.values():
            watcher.cancel()
        servers = list(self.servers.values())
        if servers:
            await asyncio.gather(*(s.stop() for s in servers), return_exceptions=True)

    def statuses(self) -> list[McpServerState]:
        return [self._state(name, server) for name, server in self.servers.items()]

    def _state(self, name: str, server: McpServer) -> McpServerState:
        return McpServerState(
            name, server.scope, server.config.transport, server.status,
            len(self._tools.get(name, ())), server.protocol_version, server.error,
            server.stderr_tail(), server.authorization_url,
        )  # fmt: skip
