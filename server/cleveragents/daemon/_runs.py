"""The LSP face's requests about runs, tools and MCP servers, mapped to the run service.

``DaemonRuns`` turns ``run/start``'s wire params into a ``RunRequest`` (with the
callbacks only this face has: ``permission/request``, ``llm/generate``, the connection's
pace), and each run's typed events into its notifications: the text the transcript
recorded is sent as it is, never encoded twice. It adds what only LSP has: work-done
progress, ``llm/delta``, ``tools/changed``. Runs themselves are the service's.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from ..checkpoints import DiffResult, FileChange, RestoreResult
from ..protocol import RUN_EVENTS, RawJson, unstructure, wire
from ..rpc import Peer, to_configs
from ..runs import (
    CapabilityError,
    CompactionSettings,
    ForkFrom,
    McpServers,
    RunRequest,
    RunRequestError,
    RunService,
    model_spec,
)
from ..tool import (
    CleverAgentsError,
    IterationFinished,
    RunEvent,
    RunFinished,
    RunStarted,
    ToolNotFoundError,
    UsageLimits,
)
from ..transcripts import PROMPT_SUMMARY_MAX, RunNotFoundError
from ._client_model import ClientModel
from ._client_tools import ClientTools
from ._mcp import status_wire
from ._permissions import asker

_METHOD: dict[type, str] = {event: method.name for event, method in RUN_EVENTS.items()}


class Notifier:
    """One run's events as this face's notifications (a ``RunObserver``)."""

    __slots__ = ("_notify", "_peer", "_runs", "limit", "prompt", "token")

    def __init__(self, runs: DaemonRuns, prompt: str, token: str | int | None) -> None:
        self._runs = runs
        self._peer = runs.peer
        self._notify = runs.peer.notify_json
        self.prompt = prompt
        self.token = token
        self.limit = 1

    def on_event(self, event: RunEvent, text: str | None, /) -> None:
        if text is not None:
            self._notify(_METHOD[event.__class__], text)
        token = self.token
        if isinstance(event, RunFinished):
            self._runs.ended(event.run_id)
            if token is not None:
                self._peer.progress(token, "end", event.result.status, None)
        elif token is None:
            return
        elif isinstance(event, IterationFinished):
            percentage = min(100, event.iteration * 100 // self.limit)
            self._peer.progress(token, "report", f"iteration {event.iteration} done", percentage)
        elif isinstance(event, RunStarted):
            self.limit = max(1, event.max_iterations)
            self._peer.progress(token, "begin", self.prompt[:80], 0)


class DaemonRuns:
    """The run, tool and MCP requests of the LSP face (see the module docstring)."""

    def __init__(
        self,
        peer: Peer,
        service: RunService,
        roots: Callable[[], list[str]],
        *,
        permissions: bool,
        llm: bool,
    ) -> None:
        self.peer = peer
        self.service = service
        self.roots = roots
        """The workspace folders now (``didChangeWorkspaceFolders`` changes them)."""
        self.permissions = permissions
        self.llm = llm
        self.tools = ClientTools(service, peer)
        self.client_models: dict[str, ClientModel] = {}
        """Runs on the editor's model, by run id: where ``llm/delta`` goes."""
        self.tokens: dict[str, str | int] = {}
        """Work-done tokens of active runs, by run id: the progress's cancel button."""

    # -- a run, from start to end ----------------------------------------------------------

    def request(self, params: wire.RunParams) -> RunRequest:
        """``run/start``'s params as a request, with this face's callbacks."""
        run_id = params.run_id or uuid.uuid4().hex
        model: Any = params.model
        model_caller = None
        try:
            model = spec = model_spec(model, self.service.settings.model)
        except CleverAgentsError:
            spec = None  # the service names it, after the request's own checks
        if spec is not None and spec.provider == "client":
            if not self.llm:
                raise CapabilityError(
                    "the 'client' model needs the client to declare "
                    "capabilities.experimental.cleveragents.llm: true in initialize"
                )
            model_caller = ClientModel(self.peer, run_id)
        return RunRequest(
            prompt=params.prompt, run_id=run_id, system_prompt=params.system_prompt,
            instructions=params.instructions,
            model=model, max_iterations=params.max_iterations, tools=params.tools,
            sandbox_root=params.sandbox_root, roots=self.roots(),
            automation_profile=params.automation_profile,
            plan_id=params.plan_id, phase=params.phase,
            resource_bindings=params.resource_bindings,
            project_resources=params.project_resources, continue_from=params.continue_from,
            mcp_servers=to_configs(params.mcp_servers or [], "params.mcpServers"),
            ask=asker(self.peer, run_id) if self.permissions else None,
            pace=self.peer.pace, model_caller=model_caller,
            limits=usage_limits(params.limits), compaction=compaction(params.compaction),
            checkpoints=params.checkpoints is not False, fork_from=fork_from(params.fork_from),
        )  # fmt: skip

    async def start(self, params: wire.RunParams) -> RawJson:
        """``run/start``: the reply is the RunResult's JSON text (made once, for
        ``run/finished`` too) when the run ends. A cancelled request
        (``$/cancelRequest``) cancels the run, then answers -32800."""
        await self.tools.settled()  # a tools/register sent before it has taken effect
        request = self.request(params)
        notifier = Notifier(self, params.prompt, params.work_done_token)
        handle = await self.service.start(request, notifier)
        if isinstance(request.model_caller, ClientModel):
            self.client_models[handle.run_id] = request.model_caller
        if params.work_done_token is not None:
            self.tokens[handle.run_id] = params.work_done_token
        try:
            await handle.result()
        except asyncio.CancelledError:
            handle.cancel("$/cancelRequest")
            await handle.wait(timeout=5)
            raise
        assert handle.result_text is not None  # set before the run's task ends
        return RawJson(handle.result_text)

    def ended(self, run_id: str) -> None:
        self.client_models.pop(run_id, None)
        self.tokens.pop(run_id, None)

    # -- other requests ------------------------------------------------------------------

    def cancel(self, params: wire.RunIdParams) -> wire.EmptyResult:
        self.service.cancel(params.run_id, "run/cancel")
        return wire.EmptyResult()

    async def get(self, params: wire.RunIdParams) -> Any:
        """A finished run's result from its transcript; for an active run, the result
        when it ends (``RunResult`` has no "running" status to report mid-run)."""
        handle = self.service.handle(params.run_id)
        if handle is not None:
            await handle.result()
            return RawJson(handle.result_text or "null")
        return await asyncio.to_thread(self.service.store.result, params.run_id)

    async def list(self, params: wire.EmptyParams) -> dict[str, Any]:
        """Active runs first, then persisted ones. The persisted summaries are the store's
        cached dicts, already in ``RunSummary``'s wire shape: building 10,000 wire objects
        per call would cost more than the whole listing's goal (50 ms)."""
        persisted = await asyncio.to_thread(self.service.store.summaries)
        handles = self.service.handles()
        active = [
            unstructure(wire.RunSummary(
                h.run_id, "running", h.prompt[:PROMPT_SUMMARY_MAX], h.started_at, h.iterations,
                h.tool_call_count, True,
            ))
            for h in handles
        ]  # fmt: skip
        ids = {h.run_id for h in handles}
        return {"runs": active + [s for s in persisted if s["runId"] not in ids]}

    # -- checkpoints ---------------------------------------------------------------------

    async def diff(self, params: wire.RunDiffParams) -> wire.RunDiffResult:
        result = await self.service.diff(params.run_id, params.iteration, roots=self.roots())
        return diff_wire(result)

    async def revert(self, params: wire.RunRevertParams) -> wire.RestoreResultWire:
        result = await self.service.revert(
            params.run_id, to_iteration=params.to_iteration,
            dry_run=params.dry_run is True, force=params.force is True, roots=self.roots(),
        )  # fmt: skip
        return restore_wire(result)

    async def restore(self, params: wire.CheckpointRestoreParams) -> wire.RestoreResultWire:
        """``checkpoint/restore``: the checkpoint is looked for in the stores of
        workspaces at or inside this daemon's workspace folders, and nowhere else."""
        root = await self.service.checkpoint_root(params.checkpoint_id, self.roots())
        result = await self.service.restore_checkpoint(
            params.checkpoint_id, root=root,
            dry_run=params.dry_run is True, force=params.force is True,
        )  # fmt: skip
        return restore_wire(result)

    def progress_cancel(self, token: str | int) -> None:
        """The progress is advertised as cancellable: its cancel button cancels the run."""
        for run_id, run_token in list(self.tokens.items()):
            if run_token == token:
                handle = self.service.handle(run_id)
                if handle is not None:
                    handle.cancel("window/workDoneProgress/cancel")

    def llm_delta(self, params: wire.LlmDeltaNotification) -> None:
        model = self.client_models.get(params.run_id)
        if model is not None:
            model.delta(params.iteration, params.text)

    # -- MCP servers and tools -----------------------------------------------------------

    def mcp_add(self, params: wire.McpAddParams) -> wire.McpAddResult:
        mcp = self.service.mcp
        configs = to_configs(params.servers, "params.servers", taken=mcp.servers)
        return wire.McpAddResult(mcp.start(configs))

    async def mcp_remove(self, params: wire.McpRemoveParams) -> wire.McpRemoveResult:
        return wire.McpRemoveResult(await self.service.mcp.remove(params.names))

    async def mcp_login(self, params: wire.McpLoginParams) -> wire.McpLoginResult:
        mcp = self._servers_of(params.run_id, params.name)
        await mcp.login(params.name)
        return wire.McpLoginResult(self._status(mcp, params.name))

    async def mcp_logout(self, params: wire.McpLogoutParams) -> wire.McpLogoutResult:
        mcp = self._servers_of(params.run_id, params.name)
        server = mcp.servers.get(params.name)
        forgotten = server is not None and server.has_stored_auth()
        await mcp.logout(params.name)
        return wire.McpLogoutResult(forgotten, self._status(mcp, params.name))

    def _servers_of(self, run_id: str | None, name: str) -> McpServers:
        """The daemon's servers, or with ``run_id`` that active run's own (-32012 when it
        has none named ``name``)."""
        if run_id is None:
            return self.service.mcp
        handle = self.service.handle(run_id)
        if handle is None:
            raise RunNotFoundError(f"unknown or finished run {run_id!r}")
        if handle.mcp is None:
            raise ToolNotFoundError(f"run {run_id!r} has no MCP server named {name!r}")
        return handle.mcp

    @staticmethod
    def _status(mcp: McpServers, name: str) -> wire.McpServerStatus:
        return next(status_wire(s) for s in mcp.statuses() if s.name == name)

    def mcp_list(self, params: wire.McpServersParams) -> wire.McpServersResult:
        states = self.service.mcp.statuses()
        if params.run_id is not None:
            handle = self.service.handle(params.run_id)
            if handle is None:
                raise RunNotFoundError(f"unknown or finished run {params.run_id!r}")
            if handle.mcp is not None:
                states += handle.mcp.statuses()
        return wire.McpServersResult([status_wire(s) for s in states])

    async def register_tools(self, params: wire.RegisterToolsParams) -> wire.RegisterToolsResult:
        return await self.tools.register(params)

    async def unregister_tools(
        self, params: wire.UnregisterToolsParams
    ) -> wire.UnregisterToolsResult:
        return await self.tools.unregister(params)

    async def list_tools(self, params: wire.ListToolsParams) -> wire.ListToolsResult:
        return await self.tools.list(params)


_LIMIT_FIELDS = ("max_tool_calls", "deadline_ms", "max_input_tokens", "max_output_tokens",
                 "max_total_tokens")  # fmt: skip


def usage_limits(given: wire.RunLimits | None) -> UsageLimits | None:
    """``run/start``'s ``limits`` as the core's; a value below 1 names its field."""
    if given is None:
        return None
    for name in _LIMIT_FIELDS:
        value = getattr(given, name)
        if value is not None and value < 1:
            raise RunRequestError(f"limits.{name}", f"must be at least 1, got {value}")
    deadline = given.deadline_ms
    return UsageLimits(
        max_tool_calls=given.max_tool_calls,
        deadline_s=deadline / 1000 if deadline is not None else None,
        max_input_tokens=given.max_input_tokens,
        max_output_tokens=given.max_output_tokens,
        max_total_tokens=given.max_total_tokens,
    )


def fork_from(given: wire.ForkFrom | None) -> ForkFrom | None:
    """``run/start``'s ``forkFrom`` as the run service's."""
    if given is None:
        return None
    return ForkFrom(given.run_id, given.iteration, given.restore_files is True)


def _change(change: FileChange) -> wire.FileChangeWire:
    return wire.FileChangeWire(
        change.path, change.status, change.additions, change.deletions, change.binary
    )


def diff_wire(result: DiffResult) -> wire.RunDiffResult:
    return wire.RunDiffResult([_change(c) for c in result.files], result.patch)


def restore_wire(result: RestoreResult) -> wire.RestoreResultWire:
    return wire.RestoreResultWire(
        files=[_change(c) for c in result.files],
        conflicts=[wire.Conflict(n.path, n.reason) for n in result.conflicts],
        skipped=[wire.Conflict(n.path, n.reason) for n in result.skipped],
        applied=result.applied,
        restore_checkpoint_id=result.restore_checkpoint_id,
    )


def compaction(given: wire.CompactionSettings | None) -> CompactionSettings:
    """``run/start``'s ``compaction`` as the run service's; bad values name their field."""
    if given is None:
        return CompactionSettings()
    share = given.compact_at
    if share is not None and not 0 < share <= 1:
        raise RunRequestError("compaction.compact_at", f"must be in (0, 1], got {share}")
    keep = given.keep_recent_iterations
    if keep is not None and keep < 0:
        raise RunRequestError("compaction.keep_recent_iterations", f"must be >= 0, got {keep}")
    return CompactionSettings(
        enabled=given.enabled is not False,
        compact_at=share if share is not None else 0.8,
        keep_recent_iterations=keep if keep is not None else 2,
        model=given.model,
    )
