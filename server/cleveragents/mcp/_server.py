"""``McpServer``: one configured MCP server's life: status, tools, calls and restarts.

It owns what the daemon reports and relies on:
- ``start()`` connects in a background task and returns at once; ``wait_ready()`` waits
  for the outcome, bounded; ``stop()`` ends it. None of them raises: a server that
  cannot start is ``failed`` with ``error`` and ``stderr_tail()`` saying why.
- its tools as ``ToolSpec``s named ``mcp:SERVER/TOOL``, rebuilt when the server says
  its list changed (then ``on_tools_changed(self)`` is called). Their schemas come from
  the server: they are compiled in a worker thread, and their validators leave the shared
  cache when the server stops;
- calls, each bounded by the entry's ``timeout_s``; a call on a dead server restarts it,
  at most ``RESTARTS_PER_MINUTE`` times in any minute.

Everything runs on the caller's asyncio loop and nothing here imports the ``mcp`` SDK:
the connection itself (``_connection``) is loaded on the first start, off the loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from cleveragents.tool import ToolCallContext, ToolOutputError, ToolSpec

from . import _sdk
from ._config import McpServerConfig
from ._errors import ConnectionLost, McpStartError, McpToolError
from ._hooks import NO_HOOKS, ClientHooks, ProgressGate
from ._link import AuthParams, ConnectionEvents, ConnectParams, Era, Link, RawResult, WireTool
from ._logfile import ServerLog
from ._tokens import TokenStore
from ._tools import build_specs, error_text, full_name, output_checks, output_of

logger = logging.getLogger("cleveragents.mcp")

Status = Literal["starting", "ready", "failed", "stopped", "needsAuth"]
Scope = Literal["daemon", "run"]

RESTARTS_PER_MINUTE = 3
STOP_TIMEOUT_S = 10.0
"""A stdio stop is bounded well below this (stdin close, SIGTERM, SIGKILL, 1 s each)."""
SETTLE_AFTER_LOSS_S = 5.0
"""How long a call that lost its connection waits for the server's error to be known."""

_ERAS: dict[str, Era] = {"2025-11-25": "handshake", "2026-07-28": "modern"}


class McpServer:
    """One MCP server, on the daemon's asyncio loop. See the module docstring.

    ``status`` is ``stopped`` until ``start()``. ``base_env`` is the whole environment a
    stdio server gets (plus its entry's ``env``); the daemon's own ``os.environ`` is never
    read. stderr goes to ``log_dir/NAME.log``. ``skipped`` lists the tools left out of
    the last listing, as ``"TOOL: reason"``.

    An HTTP server authorizes with OAuth when given ``tokens`` (where its tokens are
    kept): while a person must sign in, ``status`` is ``needsAuth`` with
    ``authorization_url`` to open, and ``on_authorize(self)`` is called so a face can
    open it; :meth:`login` and :meth:`logout` start over and forget.
    """

    def __init__(
        self,
        config: McpServerConfig,
        *,
        scope: Scope,
        log_dir: Path,
        base_env: Mapping[str, str],
        default_cwd: str | None = None,
        on_tools_changed: Callable[[McpServer], None] | None = None,
        hooks: ClientHooks = NO_HOOKS,
        tokens: TokenStore | None = None,
        on_authorize: Callable[[McpServer], None] | None = None,
    ) -> None:
        self.config = config
        self.hooks = hooks
        """Who answers what the server asks (elicitation, sampling, roots) and hears its
        progress; a connection keeps the hooks it started with."""
        self.scope: Scope = scope
        self.status: Status = "stopped"
        self.protocol_version: str | None = None
        self.error: str | None = None
        self.skipped: list[str] = []
        self.authorization_url: str | None = None
        """While ``needsAuth``: the URL the user opens to sign in."""
        self._tokens = tokens if config.url is not None else None
        self._on_authorize = on_authorize
        self._on_tools_changed = on_tools_changed
        self._env = {**base_env, **config.env}
        self._cwd = _resolve_cwd(config.cwd, default_cwd)
        self._log = ServerLog(Path(log_dir) / f"{config.name}.log") if config.command else None
        self._era: Era | None = _ERAS.get(config.protocol) if config.protocol else None
        self._task: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()
        self._link: Link | None = None
        self._tools: list[WireTool] | None = None
        self._specs: list[ToolSpec] = []
        self._output_checks: dict[str, ToolSpec | None] = {}
        self._restarts: collections.deque[float] = collections.deque()
        self._restart_lock = asyncio.Lock()
        self._events = _Events(self)

    def __repr__(self) -> str:
        return f"<McpServer {self.config.name} {self.scope} {self.status}>"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Connect in the background (status ``starting``); a no-op while a connection
        is starting or live."""
        if self._task is not None and not self._task.done():
            return
        self.status = "starting"
        self.error = None
        self.authorization_url = None
        self._settled = asyncio.Event()
        deadline = time.monotonic() + self.config.startup_timeout_s
        self._task = asyncio.get_running_loop().create_task(
            self._run(deadline), name=f"MCP server {self.config.name}"
        )

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the status is not ``starting``, at most ``timeout`` seconds
        (default: the entry's ``startup_timeout_s``). Never raises."""
        if self.status != "starting":
            return
        wait = self.config.startup_timeout_s if timeout is None else timeout
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), max(wait, 0.0))

    async def login(self) -> None:
        """Forget the server's tokens and connect again, so it asks for a new sign-in
        (its registration is kept). Returns once the server has settled (``needsAuth``
        with the URL to open, ``ready``, or ``failed``)."""
        if self._tokens is None:
            raise McpToolError(f"MCP server {self.config.name} does not authorize with OAuth")
        await self._disconnect()
        self._tokens.forget_tokens(self.config.name, self.config.url or "")
        self.start()
        await self.wait_ready()

    async def logout(self) -> bool:
        """Forget the server's tokens and registration and disconnect: it is
        ``needsAuth`` until :meth:`login`. Whether anything was stored."""
        if self._tokens is None:
            raise McpToolError(f"MCP server {self.config.name} does not authorize with OAuth")
        await self._disconnect()
        forgotten = self._tokens.forget(self.config.name)
        self.status = "needsAuth"
        self.authorization_url = None
        self.error = f"signed out; {self._login_hint()}"
        self._settled.set()
        return forgotten

    def has_stored_auth(self) -> bool:
        """Whether tokens or a registration are stored for this server."""
        return self._tokens is not None and bool(
            self._tokens.load(self.config.name, self.config.url or "")
        )

    def _login_hint(self) -> str:
        name = self.config.name
        return f"sign in with mcp/login {{name: {name!r}}} or `cleveragents mcp login {name}`"

    async def _disconnect(self) -> None:
        task = self._task
        if task is not None and not task.done():
            self.status = "stopped"  # the connection's end is not a failure
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_TIMEOUT_S)
        self._link = None

    async def stop(self) -> None:
        """Stop the server (a stdio server's whole process group) and give back its tools'
        validators; idempotent."""
        task = self._task
        self.status = "stopped"
        if task is not None and not task.done():
            task.cancel()
            _done, pending = await asyncio.wait({task}, timeout=STOP_TIMEOUT_S)
            if pending:
                logger.warning("MCP server %s did not finish stopping", self.config.name)
        self.status = "stopped"
        self._link = None
        self._tools = None
        _release(self._specs, self._output_checks)
        self._specs = []
        self._output_checks = {}
        self._settled.set()

    async def _run(self, deadline: float) -> None:
        try:
            if not _sdk.mcp_available():
                raise McpStartError(_sdk.SDK_MISSING)
            try:
                run_connection = await _sdk.load_connection()
            except ImportError as exc:
                raise McpStartError(f"{_sdk.SDK_MISSING} ({exc})") from None
            params = ConnectParams(
                self.config, self._env, self._cwd, self._log,
                self._era, self.config.protocol is not None, deadline,
                auth=AuthParams(self._tokens, self._events) if self._tokens is not None else None,
                hooks=self.hooks,
            )  # fmt: skip
            why = await run_connection(params, self._events)
            self._failed(why)
        except McpStartError as exc:
            self._failed(str(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failed server never takes anything down
            logger.exception("MCP server %s failed unexpectedly", self.config.name)
            self._failed(f"unexpected error: {_leaf_text(exc)}")
        finally:
            self._link = None
            self._settled.set()

    def _failed(self, why: str) -> None:
        if self.status == "stopped":
            return
        self.status = "failed"
        self.error = why
        logger.warning("MCP server %s failed: %s", self.config.name, why)

    # -- status --------------------------------------------------------------------------

    def stderr_tail(self) -> str | None:
        """The last 20 lines or 4 KiB (the smaller) of the current process's stderr;
        ``None`` when it wrote none, and for an HTTP server."""
        return self._log.tail() if self._log is not None else None

    def tool_specs(self) -> list[ToolSpec]:
        """The server's tools (after include/exclude) as specs named ``mcp:SERVER/TOOL``.

        Empty until the first ``ready``; kept while the server is down (a call restarts
        it), emptied by ``stop()``."""
        return list(self._specs)

    # -- calls ---------------------------------------------------------------------------

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], call: ToolCallContext | None = None
    ) -> Any:
        """Call ``tool`` (the server's own name for it) and return the record output.

        ``call`` is the run's tool call this is: what the server asks meanwhile is about
        it, and its progress goes to ``hooks.progress`` (coalesced).
        Raises ``McpToolError``: ``isError`` (the server's text), a refusal, a timeout
        after the entry's ``timeout_s``, or a server that is down (with its error and
        stderr tail). Cancelling the awaiting task cancels the request on the server."""
        name = full_name(self.config.name, tool)
        link = await self._live_link()
        timeout = self.config.timeout_s
        bound = asyncio.timeout(timeout)
        gate = self._progress_gate(call)
        try:
            async with bound:
                raw = await link.call(tool, arguments, call, gate)
        except TimeoutError:
            if bound.expired():
                raise McpToolError(f"{name} timed out after {timeout:g} s") from None
            raise McpToolError(f"{name} failed: the connection timed out") from None
        except ConnectionLost as lost:
            await self._settle_after_loss()
            why = self.error if self.status == "failed" and self.error else str(lost)
            raise McpToolError(self._down(why)) from None
        finally:
            if gate is not None:
                gate.close()
        if raw.is_error:
            raise McpToolError(error_text(raw))
        await self._check_output(name, tool, raw)
        return output_of(raw)

    def _progress_gate(self, call: ToolCallContext | None) -> ProgressGate | None:
        if call is None:
            return None
        hooks = self.hooks

        def emit(progress: float, total: float | None, message: str | None) -> None:
            try:
                hooks.progress(call, progress, total, message)
            except Exception:  # the owner's failure is not the call's
                logger.exception("MCP server %s: reporting progress failed", self.config.name)

        return ProgressGate(emit)

    async def roots_changed(self) -> None:
        """The roots ``hooks.roots()`` gives changed: tell a live server (never raises)."""
        link = self._link
        if self.status == "ready" and link is not None:
            await link.roots_changed()

    async def _live_link(self) -> Link:
        if self.status == "starting":
            await self.wait_ready()
        if self.status == "failed":
            async with self._restart_lock:
                if self.status == "failed":
                    self._restart()
            await self.wait_ready()
        link = self._link
        if self.status == "ready" and link is not None:
            return link
        if self.status == "stopped":
            raise McpToolError(f"MCP server {self.config.name} is stopped")
        if self.status == "needsAuth":
            raise McpToolError(self.needs_auth_text())
        if self.status == "starting":
            raise McpToolError(
                f"MCP server {self.config.name} is still starting after "
                f"{self.config.startup_timeout_s:g} s"
            )
        raise McpToolError(self._down(self.error or "it is not running"))

    def _restart(self) -> None:
        now = time.monotonic()
        while self._restarts and now - self._restarts[0] >= 60.0:
            self._restarts.popleft()
        if len(self._restarts) >= RESTARTS_PER_MINUTE:
            raise McpToolError(
                self._down(
                    f"{self.error}; not restarted: its restart budget is spent "
                    f"({RESTARTS_PER_MINUTE} restarts in the last minute)"
                )
            )
        self._restarts.append(now)
        logger.info("restarting MCP server %s (was: %s)", self.config.name, self.error)
        self.start()

    async def _settle_after_loss(self) -> None:
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=SETTLE_AFTER_LOSS_S)

    def needs_auth_text(self) -> str:
        """Why a call cannot go through while the server waits for a sign-in."""
        text = f"MCP server {self.config.name} needs authorization"
        if self.authorization_url is not None:
            return f"{text}: open {self.authorization_url} to sign in, or {self._login_hint()}"
        return f"{text}: {self.error or self._login_hint()}"

    def failure_text(self) -> str:
        """What a call of one of this server's tools is told when the server has no tools
        to call: its name, status and error (and the tail of its stderr)."""
        if self.status == "needsAuth":
            return self.needs_auth_text()
        if self.status == "failed":
            return self._down(self.error or "it is not running")
        if self.status == "starting":
            return f"MCP server {self.config.name} is still starting"
        return f"MCP server {self.config.name} is {self.status}"

    def _down(self, why: str) -> str:
        text = f"MCP server {self.config.name} is down: {why}"
        tail = self.stderr_tail()
        return f"{text}\nlast lines of its stderr:\n{tail}" if tail else text

    async def _check_output(self, name: str, tool: str, raw: RawResult) -> None:
        """Log (only) a ``structuredContent`` that misses the tool's ``outputSchema``.
        Checked in a worker thread: the answer may be megabytes (its check is bounded in
        time either way, and a check past its budget is logged as a mismatch)."""
        check = self._output_checks.get(tool)
        if check is None:
            return
        if raw.structured is None:
            logger.info("%s declares an outputSchema but answered without structuredContent", name)
            return
        try:
            await asyncio.to_thread(check.validate_output, raw.structured)
        except ToolOutputError as exc:
            logger.warning(
                "%s: structuredContent does not match its outputSchema (%s); used as is", name, exc
            )

    # -- tools ---------------------------------------------------------------------------

    async def _listed(self, tools: list[WireTool], *, notify: bool) -> bool:
        """Build the specs of a listing in a worker thread (compiling a server's schemas
        costs time the event loop must not spend) and take them, unless the server
        stopped meanwhile; whether they were taken."""
        specs, skipped, checks = await asyncio.to_thread(self._build, tools)
        if self.status == "stopped":
            _release(specs, checks)
            return False
        for line in skipped:
            logger.warning("MCP server %s: skipped tool %s", self.config.name, line)
        changed = self._tools is not None and tools != self._tools
        self._tools = tools
        self._specs = specs
        self.skipped = skipped
        self._output_checks = checks
        if (notify or changed) and self._on_tools_changed is not None:
            try:
                self._on_tools_changed(self)
            except Exception:  # the callback's failure is not the server's
                logger.exception("on_tools_changed for MCP server %s raised", self.config.name)
        return True

    def _build(
        self, tools: list[WireTool]
    ) -> tuple[list[ToolSpec], list[str], dict[str, ToolSpec | None]]:
        specs, skipped = build_specs(self.config, tools, self.call_tool)
        checks, unchecked = output_checks(self.config.name, tools)
        for line in unchecked:
            logger.warning("MCP server %s: answers of %s", self.config.name, line)
        return specs, skipped, checks


class _Events(ConnectionEvents):
    """What the connection reports, applied to its server."""

    def __init__(self, server: McpServer) -> None:
        self._server = server

    def authorizing(self, url: str | None) -> None:
        server = self._server
        if server.status == "stopped":
            return
        if url is None:  # the sign-in is over: the connection says how it went
            server.authorization_url = None
            if server.status == "needsAuth":
                server.status = "ready" if server._link is not None else "starting"
                server.error = None
            return
        server.status = "needsAuth"
        server.authorization_url = url
        server.error = "waiting for the user to sign in"
        server._settled.set()  # a run goes on without it; a call says how to sign in
        if server._on_authorize is not None:
            try:
                server._on_authorize(server)
            except Exception:  # the face's failure is not the server's
                logger.exception("on_authorize for MCP server %s raised", server.config.name)

    async def connected(
        self, link: Link, protocol_version: str, era: Era, tools: list[WireTool]
    ) -> None:
        server = self._server
        if server.status not in ("starting", "needsAuth"):  # stopped meanwhile
            return
        late = server._settled.is_set()  # a sign-in came first: tell of the tools
        if not await server._listed(tools, notify=late) or server.status not in (
            "starting",
            "needsAuth",
        ):
            return
        server._link = link
        server.protocol_version = protocol_version
        server._era = era
        server.status = "ready"
        server.error = None
        server._settled.set()
        logger.info(
            "MCP server %s ready (%s, %d tools)", server.config.name, protocol_version, len(tools)
        )

    async def tools_listed(self, tools: list[WireTool]) -> None:
        if self._server.status == "ready":
            await self._server._listed(tools, notify=True)


def _release(specs: list[ToolSpec], checks: Mapping[str, ToolSpec | None]) -> None:
    """Drop the validators of a server's specs from the shared cache: they go with the
    server. (A listing that replaces another leaves the old ones to the cache's bound:
    the new specs share those of unchanged schemas.)"""
    for spec in (*specs, *checks.values()):
        if spec is not None:
            spec.release_validators()


def _leaf_text(exc: BaseException) -> str:
    """The innermost error of a (possibly grouped) exception, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _resolve_cwd(cwd: str | None, default: str | None) -> str | None:
    if cwd is None:
        return default
    if default is not None and not os.path.isabs(cwd):
        return os.path.join(default, cwd)
    return cwd
