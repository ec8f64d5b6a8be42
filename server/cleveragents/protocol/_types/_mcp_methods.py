"""Wire types of the ``mcp/*`` methods: mounting, listing, signing in and out.

Apart from the entry (``_mcp``) because no ``initialize`` message holds them: they are
built at the first ``mcp/*`` request, not in the daemon's start."""

from __future__ import annotations

from typing import Literal

import attrs

from ._mcp import McpServerEntry, McpStatus
from ._optional import opt


@attrs.define
class McpAddParams:
    servers: list[McpServerEntry]
    """The servers to mount daemon-wide. All or none: one bad entry refuses the whole call and
    nothing is started."""


@attrs.define
class McpAddResult:
    """The names added; each server then starts in the background (see ``mcp/servers``)."""

    added: list[str]
    """The names added, at once; ``tools/changed`` follows when a server's tools appear."""


@attrs.define
class McpRemoveParams:
    names: list[str]
    """Names of daemon-wide servers to stop. An unknown name is -32012 and removes nothing."""


@attrs.define
class McpRemoveResult:
    removed: list[str]
    """The names stopped and unmounted; ``tools/changed`` is sent for each."""


@attrs.define
class McpServersParams:
    run_id: str | None = opt()
    """Also list this active run's own servers (-32022 for an unknown or finished run)."""


@attrs.define
class McpServerStatus:
    """One MCP server: where it is configured, how it is reached, and how it is doing."""

    name: str
    """The entry's name."""
    scope: Literal["daemon", "run"]
    """Configured daemon-wide, or by ``run/start.mcpServers``."""
    transport: Literal["stdio", "http"]
    """How it is reached."""
    status: McpStatus
    """``failed``: it did not start, or died; see ``error``. ``needsAuth``: it waits for the user
    to sign in at ``authorizationUrl`` (or, without one, for ``mcp/login``)."""
    tool_count: int
    """Its tools mounted now (after ``include``/``exclude``)."""
    protocol_version: str | None = opt()
    """The MCP version spoken: ``2025-11-25`` or ``2026-07-28``."""
    error: str | None = opt()
    """Why it failed."""
    stderr_tail: str | None = opt()
    """A stdio server's last 20 lines (at most 4 KiB) of stderr."""
    authorization_url: str | None = opt()
    """While ``needsAuth``: the URL the user opens to sign in (the daemon also asks the client to
    open it with ``window/showDocument``, when the client supports it)."""


@attrs.define
class McpLoginParams:
    name: str
    """A server of the daemon (an unknown name is -32012): its tokens are forgotten and a new
    sign-in starts."""
    run_id: str | None = opt()
    """A server of this active run's own (``run/start.mcpServers``) instead (-32022 for an
    unknown or finished run)."""


@attrs.define
class McpLoginResult:
    server: McpServerStatus
    """The server once it settled: ``needsAuth`` with ``authorizationUrl`` to open (the
    sign-in goes on in the background), ``ready``, or ``failed``."""


@attrs.define
class McpLogoutParams:
    name: str
    """A server of the daemon (an unknown name is -32012)."""
    run_id: str | None = opt()
    """A server of this active run's own instead (-32022 for an unknown or finished run)."""


@attrs.define
class McpLogoutResult:
    forgotten: bool
    """Whether tokens or a registration were stored for it (all are now deleted)."""
    server: McpServerStatus
    """The server, now ``needsAuth`` until ``mcp/login``."""


@attrs.define
class McpServersResult:
    servers: list[McpServerStatus]
    """The daemon-wide servers, then the run's own. A removed server, or a run's once the run ended,
    leaves the list."""
