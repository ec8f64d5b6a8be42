"""``RunManager``: the daemon's one stateful object, serving the requests about runs,
tools and MCP servers.

It starts runs (``_start`` checks everything that can fail before a run exists), drives
each to its end, cancels them (``run/cancel``, ``$/cancelRequest`` of their
``run/start``, the progress cancel button, signals, the end of the connection), feeds the
editor's ``llm/delta`` to the run that asked, lists them and reads them back. A live run
and its notifications are ``_run``'s; the tool requests and client tools are
``_client_tools``'s.

It knows the wire types but not JSON-RPC: the connection is a ``Peer``. Results are wire
classes, turned into JSON by one unstructure step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from ..mcp import McpServerConfig
from ..protocol import RawJson, unstructure, wire
from ..protocol import methods as m
from ..tool import (
    CleverAgentsError,
    JsonRpcCode,
    ToolActorContext,
    ToolCallContext,
    ToolRegistry,
    ToolSpec,
)
from ..transcripts import PROMPT_SUMMARY_MAX, RunNotFoundError, RunStateError, TranscriptStore
from ..workspace.shell import default_env
from ._client_tools import ClientTools
from ._collector import POLICY as COLLECTOR
from ._config import DaemonConfig, PolicyFactory
from ._errors import StateDirError
from ._mcp import McpServers, to_configs, tools_changed
from ._peer import Peer
from ._run import Run, usage_wire
from ._start import Prepared, Starter

logger = logging.getLogger(__name__)


class RunManager:
    """Owns the shared registry, the active runs and the transcript store."""

    def __init__(
        self,
        peer: Peer,
        config: DaemonConfig,
        builtin_tools: Sequence[ToolSpec] = (),
        policy_factory: PolicyFactory | None = None,
    ) -> None:
        self.peer = peer
        self.config = config
        self.registry = ToolRegistry()
        for spec in builtin_tools:
            self.registry.register(spec)
        self.builtin_names = [spec.name for spec in builtin_tools]
        self.store = TranscriptStore(config.state_dir)
        self.roots: Callable[[], Sequence[str]] = lambda: ()
        """The allowed sandbox roots (the workspace folders), set at initialize."""
        self.active: dict[str, Run] = {}
        self.tools = ClientTools(self.registry, peer, self.active, self._run_of)
        self.starter = Starter(
            config, self.registry, peer, policy_factory, self.active, lambda: self.store
        )
        self.mcp = self._mcp_servers("daemon", self.registry)
        """The daemon-wide MCP servers (``initializationOptions.mcpServers``, ``mcp/add``)."""

    def _run_of(self, call: ToolCallContext) -> Run | None:
        """The active run a tool call belongs to: the one whose cancel token it carries
        (a shared client tool is called from any run)."""
        for run in self.active.values():
            if run.cancel is call.cancel:
                return run
        return None

    def _mcp_servers(self, scope: Literal["daemon", "run"], layer: ToolRegistry) -> McpServers:
        def root() -> str | None:
            roots = self.roots()
            return roots[0] if roots else None

        return McpServers(
            scope, layer, lambda: self.config.state_dir / "mcp",
            lambda: default_env(root() or str(Path.home()), self.config.shell_env), root,
            tools_changed(self.peer),
        )  # fmt: skip

    # -- MCP servers and tools -----------------------------------------------------------

    def mcp_add(self, params: wire.McpAddParams) -> wire.McpAddResult:
        configs = to_configs(params.servers, "params.servers", taken=self.mcp.servers)
        return wire.McpAddResult(self.mcp.start(configs))

    async def mcp_remove(self, params: wire.McpRemoveParams) -> wire.McpRemoveResult:
        return wire.McpRemoveResult(await self.mcp.remove(params.names))

    def mcp_list(self, params: wire.McpServersParams) -> wire.McpServersResult:
        statuses = self.mcp.statuses()
        if params.run_id is not None:
            run = self.active.get(params.run_id)
            if run is None:
                raise RunNotFoundError(f"unknown or finished run {params.run_id!r}")
            if run.mcp is not None:
                statuses += run.mcp.statuses()
        return wire.McpServersResult(statuses)

    def register_tools(self, params: wire.RegisterToolsParams) -> wire.RegisterToolsResult:
        return self.tools.register(params)

    def unregister_tools(self, params: wire.UnregisterToolsParams) -> wire.UnregisterToolsResult:
        return self.tools.unregister(params)

    def list_tools(self, params: wire.ListToolsParams) -> wire.ListToolsResult:
        return self.tools.list(params)

    # -- a run, from start to end ----------------------------------------------------------

    async def start(self, params: wire.RunParams) -> RawJson:
        """``run/start``: the reply is the RunResult (its JSON text, made once for
        ``run/finished``) when the run ends. A cancelled request (``$/cancelRequest``)
        cancels the run, then answers -32800."""
        prepared = await self.prepare(params, self.roots())
        run = prepared.run
        task = asyncio.ensure_future(self.run(prepared))
        run.task = task
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            run.cancel.cancel("$/cancelRequest")
            await asyncio.wait([task], timeout=5)
            raise
        assert run.result_text is not None  # set by run() before its task ends
        return run.result_text

    async def prepare(self, params: wire.RunParams, roots: Sequence[str]) -> Prepared:
        """Check everything that can fail before a run exists, and build it."""
        return await self.starter.prepare(params, roots)

    async def run(self, prepared: Prepared) -> wire.RunResult:
        """Drive one run to its end; always sends ``run/finished`` and releases it."""
        run = prepared.run
        self.active[run.run_id] = run
        run.started = time.perf_counter()
        try:
            await self._mcp_ready(run, prepared.mcp_servers)
            run.emit(
                m.RUN_STARTED,
                wire.RunStartedNotification(
                    run.run_id, 0, run.sandbox_root, prepared.limit, run.registry.names()
                ),
            )
            if run.work_done_token is not None:
                self.peer.progress(run.work_done_token, "begin", run.prompt[:80], 0)
            if run.pinned is not None:
                with run.pinned.activate():
                    outcome = await self._drive(run, prepared)
            else:
                outcome = await self._drive(run, prepared)
        finally:
            if run.mcp is not None:
                await run.mcp.close()
        outcome.duration_ms = (time.perf_counter() - run.started) * 1000.0
        failure = run.transcript.failure_message()
        if failure is not None:
            outcome.status = "failed"
            outcome.error = wire.RunError(StateDirError.code, failure)
        await self._finish(run, outcome)
        return outcome

    async def _mcp_ready(self, run: Run, own: list[McpServerConfig]) -> None:
        """Before the first iteration: the daemon-wide servers still starting, and the run's
        own, are waited for (each at most its startup timeout), so the model sees their
        tools from the start and ``run/started.tools`` lists them."""
        if own:
            run.mcp = self._mcp_servers("run", run.registry)
            run.mcp.start(own)
        waiting: asyncio.Future[Any] = asyncio.gather(
            self.mcp.wait_ready(), run.mcp.wait_ready() if run.mcp is not None else _nothing()
        )
        # A cancel (run/cancel, a signal) stops the wait: the run then ends cancelled at once.
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

    async def _drive(self, run: Run, prepared: Prepared) -> wire.RunResult:
        context = prepared.context
        try:
            result = await prepared.runtime.arun_tool_loop(
                run.prompt, context, history=prepared.history, cancel=run.cancel
            )
        except asyncio.CancelledError:
            # The daemon itself is stopping: record it as a cancel.
            run.cancel.cancel(run.cancel.reason or "daemon stopping")
            return _failed(run, context, "cancelled", _cancel_error(run))
        except CleverAgentsError as exc:
            return _failed(run, context, "failed", wire.RunError(exc.code, exc.message))
        except Exception:
            logger.exception("run %s failed", run.run_id)
            message = "internal error (the daemon logged it on stderr)"
            return _failed(run, context, "failed", wire.RunError(_INTERNAL, message))
        self.starter.conversations.remember(run.run_id, result.messages)
        status = (
            "cancelled"
            if result.cancelled
            else "limit"
            if result.terminated_by_limit
            else "completed"
        )
        return wire.RunResult(
            run.run_id, status, result.content, result.tool_call_history,  # type: ignore[arg-type]
            result.iterations, result.terminated_by_limit, result.duration_ms,
            _cancel_error(run) if result.cancelled else None, usage_wire(result.usage),
        )  # fmt: skip

    async def _finish(self, run: Run, result: wire.RunResult) -> None:
        try:
            await run.emit_finished(result)
        finally:
            if run.work_done_token is not None:
                self.peer.progress(run.work_done_token, "end", result.status, None)
            run.transcript.close()
            self.active.pop(run.run_id, None)
            if not self.active:
                COLLECTOR.idle()

    # -- other requests --------------------------------------------------------------

    def cancel(self, params: wire.RunIdParams) -> wire.EmptyResult:
        run_id = params.run_id
        run = self.active.get(run_id)
        if run is None:
            if self.store.live_elsewhere(run_id):
                raise RunStateError(f"run {run_id!r} is active in another process; cancel it there")
            if self.store.exists(run_id):
                raise RunStateError(f"run {run_id!r} has already finished")
            raise RunNotFoundError(f"unknown run {run_id!r}")
        run.cancel.cancel("run/cancel")
        return wire.EmptyResult()

    async def get(self, params: wire.RunIdParams) -> Any:
        """A finished run's result from its transcript; for an active run, the result
        when it ends (``RunResult`` has no "running" status to report mid-run)."""
        run = self.active.get(params.run_id)
        if run is not None and run.task is not None:
            await asyncio.shield(run.task)
            return run.result_text
        return await asyncio.to_thread(self.store.result, params.run_id)

    async def list(self, params: wire.EmptyParams) -> dict[str, Any]:
        """Active runs first, then persisted ones. The persisted summaries are the store's
        cached dicts, already in ``RunSummary``'s wire shape: building 10,000 wire objects
        per call would cost more than the whole listing's goal (50 ms)."""
        persisted = await asyncio.to_thread(self.store.summaries)
        active = [
            unstructure(wire.RunSummary(
                r.run_id, "running", r.prompt[:PROMPT_SUMMARY_MAX], r.started_at, r.iterations,
                r.tool_call_count, True,
            ))
            for r in self.active.values()
        ]  # fmt: skip
        return {"runs": active + [s for s in persisted if s["runId"] not in self.active]}

    def progress_cancel(self, token: str | int) -> None:
        """The progress is advertised as cancellable: its cancel button cancels the run."""
        for run in list(self.active.values()):
            if run.work_done_token is not None and run.work_done_token == token:
                run.cancel.cancel("window/workDoneProgress/cancel")

    def llm_delta(self, params: wire.LlmDeltaNotification) -> None:
        run = self.active.get(params.run_id)
        if run is not None and run.on_llm_delta is not None:
            run.on_llm_delta(params.iteration, params.text)

    async def cancel_all(self, timeout: float = 0.5, reason: str = "daemon stopping") -> None:
        """Cancel every active run and wait (bounded) for their ends to be sent."""
        tasks = [run.task for run in self.active.values() if run.task is not None]
        for run in list(self.active.values()):
            run.cancel.cancel(reason)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)


_INTERNAL = int(JsonRpcCode.INTERNAL_ERROR)


def _cancel_error(run: Run) -> wire.RunError | None:
    """A run cancelled by a signal says which; other cancels carry no error."""
    reason = run.cancel.reason or ""
    if reason.startswith("SIG"):
        code = int(JsonRpcCode.REQUEST_CANCELLED)
        return wire.RunError(code, f"cancelled: the daemon received {reason}")
    return None


def _failed(
    run: Run, context: ToolActorContext, status: str, error: wire.RunError | None
) -> wire.RunResult:
    return wire.RunResult(
        run.run_id, status, "", list(context.tool_call_history),  # type: ignore[arg-type]
        run.iterations, False, 0.0, error,
    )  # fmt: skip


async def _nothing() -> None:
    return None
