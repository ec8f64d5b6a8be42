"""Runs of the daemon: start, stream, cancel, list, get, and client-registered tools.

``RunManager`` is the daemon's one stateful object. For each run it builds a core
``ToolCallingRuntime`` over a registry layer (shared tools + the run's own), an event sink
that turns loop events into numbered notifications and transcript lines, and a cancel
token. It knows the wire types but not pygls: the connection is a ``Peer``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from ..llm.spec import ModelSpec, create_caller, resolve_model_spec
from ..protocol import ParamsError, dumps, unstructure, wire
from ..protocol import methods as m
from ..tool import (
    CancelToken,
    CapabilityError,
    CleverAgentsError,
    DuplicateToolError,
    IterationSummary,
    LLMCaller,
    Message,
    ModelProviderError,
    RunNotFoundError,
    RunStateError,
    SandboxViolationError,
    ToolActorContext,
    ToolAnnotations,
    ToolCall,
    ToolCallingRuntime,
    ToolCallRecord,
    ToolCallRunResult,
    ToolError,
    ToolNotFoundError,
    ToolPolicy,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
    Usage,
    current_tool_call,
)
from ..tool._runner import output_text
from ._client_model import ClientModel
from ._peer import Peer, PeerRequestError
from ._transcripts import META, RUN_ID_PATTERN, Transcript, TranscriptStore

logger = logging.getLogger(__name__)

DEFAULT_CLIENT_TOOL_TIMEOUT_S = 120.0
RESERVED_PREFIXES = ("builtin/", "mcp:")

_current_run_id: contextvars.ContextVar[str] = contextvars.ContextVar("cleveragents_run_id")
"""The run whose task is running: how a shared client tool knows which run called it."""

PolicyFactory = Callable[[str, str | None], ToolPolicy | None]
"""Builds a run's permission policy from its run id and profile name (``None``: the
default); raises ``ProfileError`` for an unknown profile."""


class ClientToolError(ToolError):
    """A client tool answered with an error, ``isError``, or a malformed reply."""


@attrs.define(eq=False)
class Run:
    """One active run: its identity, cancel token, notification counter and transcript."""

    run_id: str
    prompt: str
    sandbox_root: str
    resource_bindings: dict[str, Any]
    registry: ToolRegistry
    transcript: Transcript
    peer: Peer
    cancel: CancelToken = attrs.field(factory=CancelToken)
    seq: int = 0
    finished: bool = False
    iterations: int = 0
    tool_call_count: int = 0
    started_at: str = ""
    work_done_token: str | int | None = None
    task: asyncio.Task[wire.RunResult] | None = None
    on_llm_delta: Callable[[int, str], None] | None = None

    def emit(self, method: str, payload: dict[str, Any]) -> None:
        """Send one numbered notification and log it; nothing after ``run/finished``.

        The params are serialised once, for the wire and the transcript alike."""
        if self.finished:
            return
        self.seq += 1
        text = dumps({"runId": self.run_id, "seq": self.seq, **payload})
        self.transcript.append_raw(method, text)
        self.peer.notify_json(method, text)
        if method == m.RUN_FINISHED:
            self.finished = True


class RunSink:
    """The loop's event sink for one run: events become notifications (design §4)."""

    def __init__(self, run: Run, max_iterations: int) -> None:
        self.run = run
        self.max_iterations = max_iterations

    def on_iteration_started(self, iteration: int) -> None:
        self.run.iterations = iteration

    def on_message_delta(self, iteration: int, text: str) -> None:
        if text:
            self.run.emit(m.RUN_MESSAGE_DELTA, {"iteration": iteration, "text": text})

    def on_tool_call_started(self, iteration: int, call: ToolCall) -> None:
        self.run.emit(
            m.RUN_TOOL_CALL_STARTED,
            {"iteration": iteration, "callId": call.id, "toolName": call.name,
             "inputs": call.arguments},
        )  # fmt: skip

    def on_tool_call(self, record: ToolCallRecord) -> None:
        self.run.tool_call_count += 1
        self.run.emit(m.RUN_TOOL_CALL, {"record": unstructure(record)})

    def on_iteration(self, summary: IterationSummary) -> None:
        payload: dict[str, Any] = {
            "iteration": summary.iteration,
            "content": summary.content,
            "toolCallCount": summary.tool_call_count,
            "durationMs": summary.duration_ms,
        }
        if summary.usage is not None:
            payload["usage"] = _usage(summary.usage)
        self.run.emit(m.RUN_ITERATION, payload)
        token = self.run.work_done_token
        if token is not None:
            percentage = min(100, summary.iteration * 100 // self.max_iterations)
            self.run.peer.progress(
                token, "report", f"iteration {summary.iteration} done", percentage
            )

    def on_finished(self, result: ToolCallRunResult) -> None:
        pass  # the manager sends run/finished itself, with the run's status


def _usage(usage: Usage) -> dict[str, int]:
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}


@attrs.define
class DaemonConfig:
    """What ``initialize`` and the command line set for every run."""

    state_dir: Path
    model: object = None
    automation_profile: str | None = None
    client_permissions: bool = False
    client_llm: bool = False
    default_max_iterations: int = 25
    custom_profiles: dict[str, Any] = attrs.field(factory=dict)


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
        self.client_tools: set[str] = set()
        for spec in builtin_tools:
            self.registry.register(spec)
        self.builtin_names = [spec.name for spec in builtin_tools]
        self.policy_factory = policy_factory
        self.store = TranscriptStore(config.state_dir)
        self.active: dict[str, Run] = {}
        self._models: dict[str, LLMCaller] = {}
        self._messages: dict[str, list[Message]] = {}
        self._starting: set[str] = set()  # bounded cache for continueFrom

    # -- tools -----------------------------------------------------------------------

    def _layer(self, run_id: str | None) -> ToolRegistry:
        if run_id is None:
            return self.registry
        run = self.active.get(run_id)
        if run is None:
            raise RunNotFoundError(f"unknown or finished run {run_id!r}")
        return run.registry

    def register_tools(self, params: wire.RegisterToolsParams) -> wire.RegisterToolsResult:
        layer = self._layer(params.run_id)
        specs = [self._client_spec(index, d) for index, d in enumerate(params.tools)]
        names = [spec.name for spec in specs]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise DuplicateToolError(f"tool {sorted(duplicates)[0]!r} appears twice in one call")
        if not params.replace:
            for name in names:
                if name in layer:
                    raise DuplicateToolError(
                        f"tool {name!r} is already registered (pass replace: true to replace it)"
                    )
        for spec in specs:
            layer.register(spec, replace=True)
            self.client_tools.add(spec.name)
        return wire.RegisterToolsResult(names)

    def unregister_tools(self, params: wire.UnregisterToolsParams) -> wire.UnregisterToolsResult:
        layer = self._layer(params.run_id)
        for name in params.names:
            if name.startswith(RESERVED_PREFIXES):
                raise ToolError(f"tool {name!r} is built in and cannot be removed")
            if not layer.owns(name):
                raise ToolNotFoundError(f"tool {name!r} is not registered")
        for name in params.names:
            layer.unregister(name)
        return wire.UnregisterToolsResult(list(params.names))

    def list_tools(self, params: wire.ListToolsParams) -> wire.ListToolsResult:
        layer = self._layer(params.run_id)
        return wire.ListToolsResult([self._listed(spec) for spec in layer.specs()])

    def _listed(self, spec: ToolSpec) -> wire.ListedTool:
        a = spec.annotations
        source = "builtin" if spec.name.startswith("builtin/") else "client"
        timeout_ms = int(spec.timeout_s * 1000) if spec.timeout_s is not None else None
        return wire.ListedTool(
            spec.name, spec.description, dict(spec.input_schema), source,  # type: ignore[arg-type]
            dict(spec.output_schema) if spec.output_schema is not None else None,
            wire.ToolAnnotationsWire(a.read_only, a.destructive, a.idempotent),
            timeout_ms,
        )  # fmt: skip

    def _client_spec(self, index: int, definition: wire.ToolDefinition) -> ToolSpec:
        name = definition.name
        if name.startswith(RESERVED_PREFIXES):
            raise ToolError(f"tool name {name!r} uses a reserved prefix (builtin/, mcp:)")
        if definition.timeout_ms is not None and definition.timeout_ms <= 0:
            raise ToolError(f"tool {name!r}: timeoutMs must be positive")
        annotations = definition.annotations or wire.ToolAnnotationsWire()
        timeout = (
            definition.timeout_ms / 1000
            if definition.timeout_ms is not None
            else DEFAULT_CLIENT_TOOL_TIMEOUT_S
        )
        try:
            return ToolSpec(
                name,
                definition.description,
                definition.input_schema,
                self._client_handler(name),
                output_schema=definition.output_schema,
                annotations=ToolAnnotations(
                    bool(annotations.read_only),
                    bool(annotations.destructive),
                    bool(annotations.idempotent),
                ),
                timeout_s=timeout,
            )
        except CleverAgentsError:
            raise
        except ValueError as exc:  # a schema that does not compile
            raise ParamsError(f"params.tools[{index}]: tool {name!r}: {exc}") from None

    def _client_handler(self, name: str) -> Callable[[dict[str, Any]], Any]:
        async def call_client(inputs: dict[str, Any]) -> Any:
            current = current_tool_call()
            run = self.active.get(_current_run_id.get(""))
            if current is None or run is None:
                raise ClientToolError(f"client tool {name} was called outside a run")
            call, iteration = current
            params = {
                "runId": run.run_id,
                "callId": call.id,
                "iteration": iteration,
                "name": name,
                "arguments": call.arguments,
                "sandboxRoot": inputs["sandbox_root"],
                "resourceBindings": inputs["resource_bindings"] or {},
            }
            msg_id, future = self.peer.request(m.TOOLS_CALL, params)
            try:
                reply = await future
            except asyncio.CancelledError:
                self.peer.cancel_request(msg_id)  # timeout or run cancel
                raise
            except PeerRequestError as exc:
                raise ClientToolError(f"client tool {name} failed: {exc}") from None
            if not isinstance(reply, dict) or "output" not in reply:
                raise ClientToolError(
                    f"client tool {name} answered tools/call without an 'output' field"
                )
            if reply.get("isError") is True:
                raise ClientToolError(output_text(reply["output"]))
            return reply["output"]

        return call_client

    # -- runs ------------------------------------------------------------------------

    async def prepare(
        self, params: wire.RunParams, roots: Sequence[str]
    ) -> tuple[Run, ToolCallingRuntime, ToolActorContext, list[Message] | None, int]:
        """Check everything that can fail before a run exists (design §10.6).

        The model is built in a worker thread: a provider SDK's first import takes
        seconds, and a scripted model reads its file."""
        if not params.prompt.strip():
            raise ParamsError("params.prompt: must not be empty")
        limit = params.max_iterations
        if limit is None:
            limit = self.config.default_max_iterations
        if limit < 1:
            raise ParamsError(f"params.maxIterations: must be at least 1, got {limit}")
        sandbox_root = self._sandbox_root(params.sandbox_root, roots)
        run_id = params.run_id or uuid.uuid4().hex
        if not RUN_ID_PATTERN.match(run_id):
            raise ParamsError("params.runId: use 1-128 letters, digits, '.', '_' or '-'")
        if run_id in self.active or run_id in self._starting or self.store.exists(run_id):
            raise RunStateError(f"run id {run_id!r} is already in use")
        self._starting.add(run_id)  # held across the await below; the transcript then holds it
        try:
            return await self._prepare(params, run_id, sandbox_root, limit)
        finally:
            self._starting.discard(run_id)

    async def _prepare(
        self, params: wire.RunParams, run_id: str, sandbox_root: str, limit: int
    ) -> tuple[Run, ToolCallingRuntime, ToolActorContext, list[Message] | None, int]:
        history = self._history(params.continue_from)
        spec = resolve_model_spec(params.model, self.config.model)
        if spec.provider == "client" and not self.config.client_llm:
            raise CapabilityError(
                "the 'client' model needs the client to declare "
                "capabilities.experimental.cleveragents.llm: true in initialize"
            )
        profile = params.automation_profile or self.config.automation_profile
        if params.tools is not None:
            unknown = [n for n in params.tools if n not in self.registry]
            if unknown:
                raise ToolNotFoundError(f"params.tools names unknown tool {unknown[0]!r}")
        policy = self.policy_factory(run_id, profile) if self.policy_factory else None
        model = None if spec.provider == "client" else await asyncio.to_thread(self._model, spec)
        layer = ToolRegistry(parent=self.registry, allow=params.tools)
        run = Run(
            run_id, params.prompt, sandbox_root, dict(params.resource_bindings or {}), layer,
            self.store.open(run_id), self.peer,
        )  # fmt: skip
        caller = model if model is not None else ClientModel(self.peer, run)
        run.work_done_token = params.work_done_token
        runtime = ToolCallingRuntime(
            layer, ToolRunner(layer, policy=policy), caller, max_iterations=limit,
            system_prompt=params.system_prompt, sink=RunSink(run, limit),
        )  # fmt: skip
        context = ToolActorContext(
            plan_id=params.plan_id,
            phase=params.phase,
            sandbox_root=sandbox_root,
            automation_profile=profile,
            resource_bindings=run.resource_bindings,
            project_resources=dict(params.project_resources or {}),
        )
        run.started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        run.transcript.append(
            META,
            {"runId": run_id, "prompt": params.prompt, "startedAt": run.started_at,
             "model": spec.describe(), "continueFrom": params.continue_from},
        )  # fmt: skip
        return run, runtime, context, history, limit

    def _model(self, spec: ModelSpec) -> LLMCaller:
        """Scripted models are built per run (a script file may change between runs);
        HTTP providers are reused, so their connection pools are."""
        if spec.provider == "scripted":
            return create_caller(spec)
        key = spec.describe() + "|" + (spec.base_url or "") + "|" + (spec.api_key_env or "")
        caller = self._models.get(key)
        if caller is None:
            caller = self._models[key] = create_caller(spec)
        return caller

    def _sandbox_root(self, requested: str | None, roots: Sequence[str]) -> str:
        if not roots:
            raise SandboxViolationError(
                "no workspace folder: initialize must name workspaceFolders or rootUri"
            )
        if requested is None:
            return roots[0]
        resolved = Path(requested).resolve()
        for root in roots:
            if resolved == Path(root) or resolved.is_relative_to(root):
                return str(resolved)
        raise SandboxViolationError(f"sandboxRoot {requested!r} is outside every workspace folder")

    def _history(self, continue_from: str | None) -> list[Message] | None:
        if continue_from is None:
            return None
        messages = self._messages.get(continue_from)
        if messages is None:
            raise RunNotFoundError(
                f"cannot continue from run {continue_from!r}: its conversation is not in "
                "this daemon's memory"
            )
        return messages

    async def run(
        self,
        run: Run,
        runtime: ToolCallingRuntime,
        context: ToolActorContext,
        history: list[Message] | None,
        limit: int,
    ) -> wire.RunResult:
        """Drive one run to its end; always sends ``run/finished`` and releases it."""
        self.active[run.run_id] = run
        token = _current_run_id.set(run.run_id)
        started = time.perf_counter()
        try:
            run.emit(
                m.RUN_STARTED,
                {"sandboxRoot": run.sandbox_root, "maxIterations": limit,
                 "tools": run.registry.names()},
            )  # fmt: skip
            if run.work_done_token is not None:
                self.peer.progress(run.work_done_token, "begin", run.prompt[:80], 0)
            outcome = await self._drive(run, runtime, context, history)
        finally:
            _current_run_id.reset(token)
        outcome.duration_ms = (time.perf_counter() - started) * 1000.0
        self._finish(run, outcome)
        return outcome

    async def _drive(
        self,
        run: Run,
        runtime: ToolCallingRuntime,
        context: ToolActorContext,
        history: list[Message] | None,
    ) -> wire.RunResult:
        try:
            result = await runtime.arun_tool_loop(
                run.prompt, context, history=history, cancel=run.cancel
            )
        except asyncio.CancelledError:
            # The daemon itself is stopping (EOF, exit): record it as a cancel.
            run.cancel.cancel("daemon stopping")
            return self._failed(run, context, "cancelled", None)
        except CleverAgentsError as exc:
            return self._failed(run, context, "failed", wire.RunError(exc.code, exc.message))
        except Exception as exc:
            logger.exception("run %s failed", run.run_id)
            error = ModelProviderError(f"internal error: {type(exc).__name__}")
            return self._failed(run, context, "failed", wire.RunError(-32603, error.message))
        self._remember(run.run_id, result.messages)
        status = (
            "cancelled"
            if result.cancelled
            else "limit"
            if result.terminated_by_limit
            else "completed"
        )
        return wire.RunResult(
            run.run_id, status, result.content, result.tool_call_history,  # type: ignore[arg-type]
            result.iterations, result.terminated_by_limit, result.duration_ms, None,
            wire.UsageWire(result.usage.input_tokens, result.usage.output_tokens)
            if result.usage is not None else None,
        )  # fmt: skip

    def _failed(
        self, run: Run, context: ToolActorContext, status: str, error: wire.RunError | None
    ) -> wire.RunResult:
        return wire.RunResult(
            run.run_id, status, "", list(context.tool_call_history),  # type: ignore[arg-type]
            run.iterations, False, 0.0, error,
        )  # fmt: skip

    def _remember(self, run_id: str, messages: list[Message]) -> None:
        self._messages[run_id] = messages
        while len(self._messages) > 64:  # keep memory bounded; transcripts stay on disk
            self._messages.pop(next(iter(self._messages)))

    def _finish(self, run: Run, result: wire.RunResult) -> None:
        try:
            run.emit(m.RUN_FINISHED, {"result": unstructure(result)})
        finally:
            if run.work_done_token is not None:
                self.peer.progress(run.work_done_token, "end", result.status, None)
            run.transcript.close()
            self.active.pop(run.run_id, None)

    def cancel(self, run_id: str) -> None:
        run = self.active.get(run_id)
        if run is None:
            if self.store.exists(run_id):
                raise RunStateError(f"run {run_id!r} has already finished")
            raise RunNotFoundError(f"unknown run {run_id!r}")
        run.cancel.cancel("run/cancel")

    async def get(self, run_id: str) -> dict[str, Any]:
        """A finished run's result from its transcript; for an active run, the result
        when it ends (``RunResult`` has no "running" status to report mid-run)."""
        run = self.active.get(run_id)
        if run is not None and run.task is not None:
            result: wire.RunResult = await asyncio.shield(run.task)
            return dict(unstructure(result))
        return await asyncio.to_thread(self.store.result, run_id)

    async def list(self) -> list[dict[str, Any]]:
        persisted = await asyncio.to_thread(self.store.summaries)
        active_ids = set(self.active)
        active = [
            {"runId": r.run_id, "status": "running", "prompt": r.prompt, "startedAt": r.started_at,
             "iterations": r.iterations, "toolCallCount": r.tool_call_count, "active": True}
            for r in self.active.values()
        ]  # fmt: skip
        return active + [s for s in persisted if s["runId"] not in active_ids]

    async def cancel_all(self, timeout: float = 0.5) -> None:
        """Cancel every active run and wait (bounded) for their transcripts to close."""
        tasks = [run.task for run in self.active.values() if run.task is not None]
        for run in list(self.active.values()):
            run.cancel.cancel("daemon stopping")
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
