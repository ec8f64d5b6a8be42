"""``RunService``: runs, whatever face asked for them.

One service per process serves every run of its face: one tool catalogue (the built-in
tools, a face's own, the service-wide MCP servers'), one model-client cache (HTTP
providers' connection pools are reused), one transcript store, and the recent
conversations ``continue_from`` continues. ``start`` checks a request, builds the run
and drives it in a task; its ``RunHandle`` gives the events, the result and the cancel.

It knows no wire: the LSP daemon, the ACP face and the terminal each map its typed
events to what they show.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..llm import get_provider
from ..llm.spec import ModelSpec, create_caller
from ..mcp import McpServerConfig, TokenStore
from ..tool import (
    AllowAll,
    CleverAgentsError,
    JsonRpcCode,
    LLMCaller,
    Message,
    RunError,
    RunResult,
    RunStarted,
    RunStatus,
    ToolActorContext,
    ToolCallContext,
    ToolRegistry,
    ToolSpec,
    Usage,
)
from ..transcripts import RunNotFoundError, RunStateError, TranscriptStore
from ._checkpoints import CheckpointOps, CheckpointStores
from ._collector import POLICY as COLLECTOR
from ._errors import StateDirError
from ._mcp import McpServers, server_env
from ._mcp_hooks import McpClientSide, Sampler, ServiceHooks
from ._prepare import Prepared, prepare
from ._request import RunRequest
from ._run import TRANSCRIPT_FAILED, Run, RunHandle, RunObserver

if TYPE_CHECKING:
    from ..mcp import McpServer
from ._settings import RunSettings, warn_if_state_dir_inside

logger = logging.getLogger(__name__)

REMEMBERED_MESSAGES = 16_000
"""Messages of finished runs kept in memory for ``continue_from`` (see ``Conversations``)."""


class Conversations:
    """Recent conversations for ``continue_from``, within a budget of messages: a long
    run's would keep hundreds of thousands of objects alive, for the collector to scan
    again and again. Any other is rebuilt from its transcript when needed."""

    def __init__(self) -> None:
        self.messages: dict[str, list[Message]] = {}
        self._count = 0

    def remember(self, run_id: str, messages: list[Message]) -> None:
        if len(messages) > REMEMBERED_MESSAGES // 8:
            return
        self.messages[run_id] = messages
        self._count += len(messages)
        while len(self.messages) > 64 or self._count > REMEMBERED_MESSAGES:
            self._count -= len(self.messages.pop(next(iter(self.messages))))


class RunService(CheckpointOps):
    """Starts and drives runs for a face (see the module docstring); its checkpoint
    requests (``diff``, ``revert``, ``restore_checkpoint``) are ``CheckpointOps``'."""

    def __init__(
        self,
        settings: RunSettings,
        tools: Sequence[ToolSpec] = (),
        *,
        on_tools_changed: Callable[[str], None] | None = None,
        on_authorize: Callable[[McpServer], None] | None = None,
        mcp_client: McpClientSide | None = None,
    ) -> None:
        """Build the service; call it on the event loop that will drive its runs (the
        service-wide MCP servers start in the background at once). ``on_authorize`` is
        told when an MCP server waits for the user to sign in (its
        ``authorization_url``), so the face can open it."""
        self.settings = settings
        self.registry = ToolRegistry()
        for spec in tools:
            self.registry.register(spec)
        self.builtin_names = [spec.name for spec in tools]
        self.store = TranscriptStore(settings.state_dir)
        warn_if_state_dir_inside(settings.state_dir, settings.workspace_folders)
        self.active: dict[str, Run] = {}
        self.starting: set[str] = set()
        self.conversations = Conversations()
        self._models: dict[str, LLMCaller] = {}
        self.checkpoint_stores = CheckpointStores(
            settings.state_dir, settings.checkpoint_settings, self.store, lambda: self.active
        )
        self._on_tools_changed = on_tools_changed
        self._on_authorize = on_authorize
        self.mcp_tokens = TokenStore(settings.state_dir)
        """Where MCP servers' OAuth tokens are kept (``STATE/mcp-auth``)."""
        self.mcp_client = mcp_client if mcp_client is not None else McpClientSide()
        """What the face answers for MCP servers: elicitations, the roots of the moment."""
        self._pools: weakref.WeakSet[McpServers] = weakref.WeakSet()
        self.mcp = self.mcp_servers("daemon", self.registry)
        """The service-wide MCP servers (``settings.mcp_servers``, and any added later)."""
        if settings.mcp_servers:
            self.mcp.start(settings.mcp_servers)

    def mcp_servers(
        self,
        scope: Any,
        layer: ToolRegistry,
        roots: Callable[[], Sequence[str]] | None = None,
        *,
        on_authorize: Callable[[McpServer], None] | None = None,
    ) -> McpServers:
        """A new pool of MCP servers whose tools go to ``layer`` (a face keeps one per
        session, the service one per run that names its own); ``roots`` replaces the
        face's roots for them (an ACP session's own), ``on_authorize`` the service's (a
        face's session shows the sign-in itself)."""
        folders = self.settings.workspace_folders
        root = folders[0] if folders else None
        env = server_env(self.settings.shell_env)
        log_dir = self.settings.state_dir / "mcp"
        pool = McpServers(
            scope, layer, log_dir, env, root, self._on_tools_changed,
            tokens=self.mcp_tokens, on_authorize=on_authorize or self._on_authorize,
            hooks=ServiceHooks(self, self.mcp_client, roots),
        )  # fmt: skip
        self._pools.add(pool)
        return pool

    async def roots_changed(self) -> None:
        """The workspace folders changed: every MCP server that asked for its roots is
        told (``notifications/roots/list_changed``) and asks again."""
        pools = list(self._pools)
        if pools:
            await asyncio.gather(*(pool.roots_changed() for pool in pools))

    # -- runs ----------------------------------------------------------------------------

    async def start(self, request: RunRequest, observer: RunObserver | None = None) -> RunHandle:
        """Check the request and start the run; raises before any run exists when the
        request cannot run (a ``CleverAgentsError`` naming what is wrong)."""
        prepared = await prepare(self, request, observer)
        run = prepared.run
        self.active[run.run_id] = run
        run.task = asyncio.ensure_future(self._run(prepared))
        return RunHandle(run)

    def handle(self, run_id: str) -> RunHandle | None:
        """The active run of that id."""
        run = self.active.get(run_id)
        return RunHandle(run) if run is not None else None

    def handles(self) -> list[RunHandle]:
        return [RunHandle(run) for run in self.active.values()]

    def run_of(self, call: ToolCallContext) -> RunHandle | None:
        """The active run a tool call belongs to: the one whose cancel token it carries
        (a shared tool is called from any run)."""
        for run in self.active.values():
            if run.cancel is call.cancel:
                return RunHandle(run)
        return None

    def cancel(self, run_id: str, reason: str) -> None:
        """Cancel an active run; a clear error for one that is not."""
        run = self.active.get(run_id)
        if run is None:
            if self.store.live_elsewhere(run_id):
                raise RunStateError(f"run {run_id!r} is active in another process; cancel it there")
            if self.store.exists(run_id):
                raise RunStateError(f"run {run_id!r} has already finished")
            raise RunNotFoundError(f"unknown run {run_id!r}")
        run.cancel.cancel(reason)

    async def cancel_all(self, timeout: float = 0.5, reason: str = "daemon stopping") -> None:
        """Cancel every active run and wait (bounded) for their ends to be recorded."""
        tasks = [run.task for run in self.active.values() if run.task is not None]
        for run in list(self.active.values()):
            run.cancel.cancel(reason)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def aclose(self, timeout: float = 2.0, reason: str = "daemon stopping") -> None:
        """End every run, then stop the MCP servers and close the model clients."""
        await self.cancel_all(timeout, reason)
        await self.mcp.close()
        await self.close_models()
        await self.checkpoint_stores.aclose()

    # -- what runs share -----------------------------------------------------------------

    def model(self, spec: ModelSpec) -> LLMCaller:
        """A provider's caller is reused across runs (HTTP providers: their connection
        pools are), unless its registration says to build one per run (the scripted
        model: a script file may change between runs)."""
        if not get_provider(spec.provider).shared:
            return create_caller(spec)
        key = spec.describe() + "|" + (spec.base_url or "") + "|" + (spec.api_key_env or "")
        caller = self._models.get(key)
        if caller is None:
            caller = self._models[key] = create_caller(spec)
        return caller

    async def close_models(self) -> None:
        """Close the reused HTTP callers' SDK clients (their connection pools); a later
        run opens new ones."""
        models, self._models = list(self._models.values()), {}
        for caller in models:
            aclose = getattr(caller, "aclose", None)
            if aclose is not None:
                await aclose()

    def history(self, continue_from: str | None) -> list[Message] | None:
        """The conversation ``continue_from`` names: from memory when this service ran
        it, else rebuilt from its transcript. Unknown: -32022; still running: -32023;
        interrupted: -32028."""
        if continue_from is None:
            return None
        messages = self.conversations.messages.get(continue_from)
        if messages is not None:
            return messages
        if continue_from in self.active:
            raise RunStateError(f"cannot continue from run {continue_from!r}: it is still running")
        return self.store.conversation(continue_from)

    # -- driving one run -----------------------------------------------------------------

    async def _run(self, prepared: Prepared) -> RunResult:
        """Drive one run to its end; always records ``RunFinished`` and releases it."""
        run = prepared.run
        run.started = time.perf_counter()
        runtime = prepared.runtime
        run.sampler = Sampler(
            runtime.runner.policy or AllowAll(), runtime.llm_caller, prepared.context,
            runtime.limits, lambda: run.used,
        )  # fmt: skip
        try:
            await self._mcp_ready(run, prepared.mcp_servers)
            run.on_event(RunStarted(run.sandbox_root, prepared.limit, run.registry.names()))
            if run.pinned is not None:
                with run.pinned.activate():
                    result = await self._drive(run, prepared)
            else:
                result = await self._drive(run, prepared)
        finally:
            if run.mcp is not None:
                await run.mcp.close()
        result.duration_ms = (time.perf_counter() - run.started) * 1000.0
        failure = run.recorder.failure()
        if failure is not None:
            result.status = "failed"
            result.content = ""
            result.terminated_by_limit = False
            result.error = RunError(StateDirError.code, failure)
        if run.checkpoints is not None:
            await run.checkpoints.settle()
        try:
            await run.finish(result)
        finally:
            run.recorder.transcript.close()
            self.active.pop(run.run_id, None)
            if run.checkpoints is not None and run.checkpoints.used:
                self.checkpoint_stores.maybe_prune(run.sandbox_root)
            if not self.active:
                COLLECTOR.idle()
        return result

    async def _mcp_ready(self, run: Run, own: Sequence[McpServerConfig]) -> None:
        """Before the first iteration: the service-wide servers still starting, and the
        run's own, are waited for (each at most its startup timeout), so the model sees
        their tools from the start and ``RunStarted.tools`` lists them."""
        if own:
            run.mcp = self.mcp_servers("run", run.registry)
            run.mcp.start(own)
        waiting: asyncio.Future[Any] = asyncio.gather(
            self.mcp.wait_ready(), run.mcp.wait_ready() if run.mcp is not None else _nothing()
        )
        # A cancel stops the wait: the run then ends cancelled at once.
        loop = asyncio.get_running_loop()
        cancelled: asyncio.Future[Any] = loop.create_future()

        def settle() -> None:
            if not cancelled.done():
                cancelled.set_result(None)

        def on_cancel() -> None:
            loop.call_soon_threadsafe(settle)

        remove = run.cancel.add_callback(on_cancel)
        try:
            await asyncio.wait([waiting, cancelled], return_when=asyncio.FIRST_COMPLETED)
        finally:
            remove()
            waiting.cancel()
            cancelled.cancel()

    async def _drive(self, run: Run, prepared: Prepared) -> RunResult:
        context = prepared.context
        try:
            result = await prepared.runtime.arun_tool_loop(
                run.prompt, context, history=prepared.history, cancel=run.cancel
            )
        except asyncio.CancelledError:
            # The process itself is stopping: record it as a cancel.
            run.cancel.cancel(run.cancel.reason or "daemon stopping")
            return _failed(run, context, "cancelled", _cancel_error(run))
        except CleverAgentsError as exc:
            return _failed(run, context, "failed", RunError(exc.code, exc.message))
        except Exception:
            logger.exception("run %s failed", run.run_id)
            message = "internal error (the daemon logged it on stderr)"
            return _failed(run, context, "failed", RunError(_INTERNAL, message))
        self.conversations.remember(run.run_id, result.messages)
        status: RunStatus = (
            "cancelled"
            if result.cancelled
            else "limit"
            if result.terminated_by_limit
            else "completed"
        )
        return RunResult(
            run.run_id, status, result.content, result.tool_call_history, result.iterations,
            result.terminated_by_limit, result.duration_ms,
            _cancel_error(run) if result.cancelled else None, _usage(result.usage, run),
            limit_reason=result.limit_reason,
        )  # fmt: skip


_INTERNAL = int(JsonRpcCode.INTERNAL_ERROR)


def _cancel_error(run: Run) -> RunError | None:
    """A run cancelled by a signal says which; other cancels carry no error."""
    reason = run.cancel.reason or ""
    if reason.startswith("SIG"):
        code = int(JsonRpcCode.REQUEST_CANCELLED)
        return RunError(code, f"cancelled: the daemon received {reason}")
    if reason == TRANSCRIPT_FAILED:
        return RunError(StateDirError.code, run.recorder.failure() or reason)
    return None


def _failed(
    run: Run, context: ToolActorContext, status: RunStatus, error: RunError | None
) -> RunResult:
    return RunResult(
        run.run_id, status, "", list(context.tool_call_history), run.iterations, False, 0.0,
        error,
    )  # fmt: skip


def _usage(loop: Usage | None, run: Run) -> Usage | None:
    """The run's usage: its loop's model calls, and the answers its model gave its MCP
    servers' sampling requests."""
    sampled = run.sampler.usage if run.sampler is not None else None
    if sampled is None:
        return loop
    return sampled if loop is None else loop + sampled


async def _nothing() -> None:
    return None
