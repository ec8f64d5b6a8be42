"""Runs of the daemon, their whole lifecycle, and client-registered tools.

``RunManager`` is the daemon's one stateful object: it starts runs (checking everything
that can fail before a run exists), drives each to its end, cancels them (``run/cancel``,
``$/cancelRequest`` of their ``run/start``, the progress cancel button, signals, the end
of the connection), feeds the editor's ``llm/delta`` to the run that asked, lists them and
reads them back. For each run it builds a core ``ToolCallingRuntime`` over a registry
layer (shared tools + the run's own), an event sink that turns loop events into numbered
notifications and transcript lines, an output cap, and a cancel token.

It knows the wire types but not JSON-RPC: the connection is a ``Peer``. Notification
payloads and results are wire classes, turned into JSON by one unstructure step.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import attrs

from ..llm.spec import ModelSpec, create_caller, resolve_model_spec
from ..mcp import McpServerConfig
from ..protocol import MAX_BODY, ParamsError, RawJson, camel, dumps, unstructure, wire
from ..protocol import methods as m
from ..tool import (
    CancelToken,
    CleverAgentsError,
    DuplicateToolError,
    IterationSummary,
    LLMCaller,
    LLMRequest,
    LLMResponse,
    Message,
    SchemaDefinitionError,
    ToolActorContext,
    ToolAnnotations,
    ToolCall,
    ToolCallContext,
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
)
from ..tool._runner import output_text
from ..tool._spec import is_async_callable
from ..workspace import PinnedRoot, SandboxViolationError
from ..workspace.shell import default_env
from ._client_model import ClientModel
from ._collector import POLICY as COLLECTOR
from ._errors import CapabilityError, RunNotFoundError, RunStateError, StateDirError
from ._mcp import McpServers, to_configs, tools_changed
from ._outputs import DEFAULT_MAX_TOOL_OUTPUT_BYTES, OutputCap
from ._peer import Peer, PeerRequestError
from ._transcripts import META, PROMPT_SUMMARY_MAX, Transcript, TranscriptStore, valid_run_id

logger = logging.getLogger(__name__)

DEFAULT_CLIENT_TOOL_TIMEOUT_S = 120.0
REMEMBERED_MESSAGES = 16_000
"""Messages of finished runs kept in memory for ``continueFrom`` (see ``_remember``)."""
RESERVED_PREFIXES = ("builtin/", "mcp:")
CANCELLED = -32800

_current_run_id: contextvars.ContextVar[str] = contextvars.ContextVar("cleveragents_run_id")
"""The run whose task is running: how a shared client tool knows which run called it."""

PolicyFactory = Callable[[str, str | None], ToolPolicy | None]
"""Builds a run's permission policy from its run id and profile name (``None``: the
default); raises ``ProfileError`` for an unknown profile."""


class ClientToolError(ToolError):
    """A client tool answered with an error, ``isError``, or a malformed reply."""


def _reserved(name: str) -> bool:
    return name.lower().startswith(RESERVED_PREFIXES)


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
    started: float = 0.0
    work_done_token: str | int | None = None
    task: asyncio.Task[wire.RunResult] | None = None
    on_llm_delta: Callable[[int, str], None] | None = None
    pinned: PinnedRoot | None = None
    """The sandbox root as pinned at run/start: every tool call checks it still is."""
    mcp: McpServers | None = None
    """The run's own MCP servers (``run/start.mcpServers``), stopped when it ends."""

    record_texts: dict[int, str] = attrs.field(factory=dict)
    """Each record's JSON text as sent in its ``run/toolCall``, by ``id(record)``: the
    result is assembled from them, so ending a run of 100,000 records encodes nothing
    twice and never blocks the event loop for long."""
    result_text: RawJson | None = None
    """The RunResult's JSON text once the run ended: the ``run/start`` reply."""
    _record_frame: tuple[str, str, str] | None = None
    """``run/toolCall`` params as made from the wire class, cut around ``seq`` and
    ``record``: each record is then encoded once, and its notification costs a format."""

    def emit(self, method: str, notification: Any) -> None:
        """Send one numbered notification and log it; nothing after ``run/finished``.

        ``notification`` is the method's wire class; its ``seq`` is set here. The params
        are serialised once, for the wire and the transcript alike."""
        if self.finished:
            return
        self.seq += 1
        notification.seq = self.seq
        self._send(method, _encode(unstructure(notification)))

    def emit_record(self, record: ToolCallRecord) -> None:
        """``run/toolCall``, keeping the record's own text for the result."""
        if self.finished:
            return
        self.seq += 1
        if self._record_frame is None:  # once per run: the params around seq and record
            payload = unstructure(wire.ToolCallNotification(self.run_id, self.seq, record))
            payload["seq"], payload["record"] = _SEQ, _RAW
            head = _encode(payload)
            at, end = head.index(_SEQ_JSON), head.index(_RAW_JSON)
            self._record_frame = (
                head[:at], head[at + len(_SEQ_JSON) : end], head[end + len(_RAW_JSON) :]
            )  # fmt: skip
        before, between, after = self._record_frame
        text = _encode(unstructure(record))
        self.record_texts[id(record)] = text
        self._send(m.RUN_TOOL_CALL, f"{before}{self.seq}{between}{text}{after}")

    async def emit_finished(self, result: wire.RunResult) -> RawJson:
        """``run/finished``; returns the result's JSON text, which the reply reuses.

        A result of many records is megabytes of text: it is assembled in chunks and
        written to the transcript from a thread, yielding to the event loop in between,
        so other runs and requests are served while it ends. The result is trimmed first
        if it would not fit one frame (see :func:`_fit`)."""
        await asyncio.sleep(0)  # the loop's own ending ran in the step before this one
        text = await self._result_text(result)
        if not self.finished:
            self.seq += 1
            empty = attrs.evolve(result, tool_call_history=[])
            payload = unstructure(wire.RunFinishedNotification(self.run_id, self.seq, empty))
            params = _splice(payload, "result", text.text)
            await asyncio.sleep(0)
            if len(params) > _INLINE_WRITE:
                await asyncio.to_thread(self.transcript.append_raw, m.RUN_FINISHED, params)
            else:
                self.transcript.append_raw(m.RUN_FINISHED, params)
            self.peer.notify_json(m.RUN_FINISHED, params)
            self.finished = True
            await asyncio.sleep(0)
        self.result_text = text
        self.record_texts = {}
        return text

    async def _result_text(self, result: wire.RunResult) -> RawJson:
        history = result.tool_call_history
        cached = self.record_texts
        texts: list[str] = []
        for start in range(0, len(history), _CHUNK):
            chunk = history[start : start + _CHUNK]
            texts.extend(cached.get(id(r)) or _encode(unstructure(r)) for r in chunk)
            await asyncio.sleep(0)
        result.tool_call_history = []
        omitted = _fit(texts, len(_encode(unstructure(result)).encode("utf-8")))
        if omitted:
            result.omitted_records = omitted
            logger.warning(
                "run %s: left %d records out of its result to fit the frame limit",
                self.run_id, omitted,
            )  # fmt: skip
        payload = unstructure(result)
        result.tool_call_history = history[omitted:]
        records = ",".join(texts[omitted:])
        await asyncio.sleep(0)
        text = RawJson(_splice(payload, "toolCallHistory", "[", records, "]"))
        await asyncio.sleep(0)
        return text

    def _send(self, method: str, text: str) -> None:
        self.transcript.append_raw(method, text)
        self.peer.notify_json(method, text)
        if method == m.RUN_FINISHED:
            self.finished = True


_CHUNK = 2000
"""Records handled between two yields to the event loop while a run ends."""
_INLINE_WRITE = 1024 * 1024
"""Transcript lines longer than this are written from a thread (the write releases the
GIL; the event loop goes on)."""

_RAW = "\x00raw-" + secrets.token_hex(16)
_RAW_JSON = dumps(_RAW)
_SEQ = "\x00seq-" + secrets.token_hex(16)
_SEQ_JSON = dumps(_SEQ)


def _splice(payload: dict[str, Any], key: str, *raw: str) -> str:
    """The JSON text of ``payload`` with ``payload[key]`` replaced by ``raw`` (the pieces of
    JSON text made already, joined in one copy). The placeholder is random per process,
    so no value a model or a client sends can be taken for it."""
    payload[key] = _RAW
    head = _encode(payload)
    at = head.index(_RAW_JSON)
    return "".join((head[:at], *raw, head[at + len(_RAW_JSON) :]))


def _encode(payload: Any) -> str:
    """JSON text of a payload; a non-finite number (which only a model's arguments can
    still hold here: tool outputs are checked by the output cap) becomes null."""
    try:
        return dumps(payload)
    except ValueError:
        logger.warning("replaced a non-finite number with null in a notification")
        return dumps(_finite(payload))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


class RunSink:
    """The loop's event sink for one run: events become notifications (design §4)."""

    def __init__(self, run: Run, max_iterations: int) -> None:
        self.run = run
        self.max_iterations = max_iterations

    def on_iteration_started(self, iteration: int) -> None:
        self.run.iterations = iteration

    def on_message_delta(self, iteration: int, text: str) -> None:
        if text:
            run = self.run
            delta = wire.MessageDeltaNotification(run.run_id, 0, iteration, text)
            run.emit(m.RUN_MESSAGE_DELTA, delta)

    def on_tool_call_started(self, iteration: int, call: ToolCall) -> None:
        run = self.run
        run.emit(
            m.RUN_TOOL_CALL_STARTED,
            wire.ToolCallStartedNotification(
                run.run_id,
                0,
                iteration,
                call.id,
                call.name,
                call.arguments,
            ),
        )

    def on_tool_call(self, record: ToolCallRecord) -> None:
        run = self.run
        run.tool_call_count += 1
        run.emit_record(record)

    def on_iteration(self, summary: IterationSummary) -> None:
        run = self.run
        run.emit(
            m.RUN_ITERATION,
            wire.IterationNotification(
                run.run_id, 0, summary.iteration, summary.content, summary.tool_call_count,
                summary.duration_ms, _usage(summary.usage),
            ),
        )  # fmt: skip
        token = run.work_done_token
        if token is not None:
            percentage = min(100, summary.iteration * 100 // self.max_iterations)
            run.peer.progress(token, "report", f"iteration {summary.iteration} done", percentage)

    def on_finished(self, result: ToolCallRunResult) -> None:
        pass  # the manager sends run/finished itself, with the run's status


def _usage(usage: Usage | None) -> wire.UsageWire | None:
    return None if usage is None else wire.UsageWire(usage.input_tokens, usage.output_tokens)


class PacedCaller:
    """The run's model, called only once the client has read what was sent (backpressure:
    a client that stops reading stalls its own runs, not the daemon's memory)."""

    def __init__(self, caller: LLMCaller, peer: Peer) -> None:
        self._caller = caller
        self._peer = peer
        self._async = is_async_callable(caller)
        self._inline = getattr(caller, "blocking", True) is False

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        await self._peer.pace()
        caller: Any = self._caller
        if self._async:
            response: LLMResponse = await caller(request)
        elif self._inline:
            response = caller(request)
        else:
            response = await asyncio.to_thread(caller, request)
        return response


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
    max_tool_output_bytes: int = DEFAULT_MAX_TOOL_OUTPUT_BYTES
    shell_env: list[str] = attrs.field(factory=list)
    """``initializationOptions.shellEnv``: also passed to MCP servers' environment."""


@attrs.define
class _Prepared:
    run: Run
    runtime: ToolCallingRuntime
    context: ToolActorContext
    history: list[Message] | None
    limit: int
    mcp_servers: list[McpServerConfig] = attrs.field(factory=list)


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
        self.roots: Callable[[], Sequence[str]] = lambda: ()
        """The allowed sandbox roots (the workspace folders), set at initialize."""
        self.active: dict[str, Run] = {}
        self._models: dict[str, LLMCaller] = {}
        self._messages: dict[str, list[Message]] = {}
        self._remembered = 0
        self._starting: set[str] = set()
        self.mcp = self._mcp_servers("daemon", self.registry)
        """The daemon-wide MCP servers (``initializationOptions.mcpServers``, ``mcp/add``)."""

    def _mcp_servers(self, scope: Literal["daemon", "run"], layer: ToolRegistry) -> McpServers:
        def root() -> str | None:
            roots = self.roots()
            return roots[0] if roots else None

        return McpServers(
            scope, layer, lambda: self.config.state_dir / "mcp",
            lambda: default_env(root() or str(Path.home()), self.config.shell_env), root,
            tools_changed(self.peer),
        )  # fmt: skip

    # -- MCP servers -------------------------------------------------------------------

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
            if _reserved(name):
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
        source = (
            "builtin" if spec.name.startswith("builtin/")
            else "mcp" if spec.name.startswith("mcp:")
            else "client"
        )  # fmt: skip
        timeout_ms = int(spec.timeout_s * 1000) if spec.timeout_s is not None else None
        return wire.ListedTool(
            spec.name, spec.description, dict(spec.input_schema), source,  # type: ignore[arg-type]
            dict(spec.output_schema) if spec.output_schema is not None else None,
            wire.ToolAnnotationsWire(a.read_only, a.destructive, a.idempotent),
            timeout_ms,
        )  # fmt: skip

    def _client_spec(self, index: int, definition: wire.ToolDefinition) -> ToolSpec:
        name = definition.name
        if _reserved(name):
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
        except SchemaDefinitionError as exc:
            where = ".".join(part for part in (camel(exc.field), exc.path) if part)
            raise ParamsError(
                f"params.tools[{index}].{where}: {exc.problem} (tool {name!r}: "
                "not a valid JSON Schema)"
            ) from None

    def _client_handler(
        self, name: str
    ) -> Callable[[dict[str, Any], ToolCallContext], Awaitable[Any]]:
        async def call_client(inputs: dict[str, Any], call: ToolCallContext) -> Any:
            run = self.active.get(_current_run_id.get(""))
            if run is None:
                raise ClientToolError(f"client tool {name} was called outside a run")
            params = wire.ToolsCallParams(
                run.run_id, call.call_id, call.iteration, name, call.arguments,
                inputs["sandbox_root"], inputs["resource_bindings"] or {},
            )  # fmt: skip
            await self.peer.pace()
            msg_id, future = self.peer.request(m.TOOLS_CALL, unstructure(params))
            try:
                reply = await future
            except asyncio.CancelledError:  # timeout or run cancel
                self.peer.cancel_request(msg_id, {"runId": run.run_id, "callId": call.call_id})
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

    # -- starting a run --------------------------------------------------------------

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

    async def prepare(self, params: wire.RunParams, roots: Sequence[str]) -> _Prepared:
        """Check everything that can fail before a run exists (design §10.6).

        The model is built in a worker thread: a provider SDK's first import takes
        seconds, and a scripted model reads its file."""
        if not params.prompt.strip():
            raise ParamsError("params.prompt: must not be empty")
        _check_text(params.prompt, "params.prompt")
        if params.system_prompt is not None:
            _check_text(params.system_prompt, "params.systemPrompt")
        limit = params.max_iterations
        if limit is None:
            limit = self.config.default_max_iterations
        if limit < 1:
            raise ParamsError(f"params.maxIterations: must be at least 1, got {limit}")
        sandbox_root = self._sandbox_root(params.sandbox_root, roots)
        run_id = params.run_id or uuid.uuid4().hex
        if not valid_run_id(run_id):
            raise ParamsError(
                "params.runId: use 1-128 letters, digits, '.', '_' or '-' (not '.' or '..')"
            )
        if run_id in self.active or run_id in self._starting:
            raise RunStateError(f"run id {run_id!r} is already in use")
        self._starting.add(run_id)  # held across the awaits below; the transcript then holds it
        try:
            return await self._prepare(params, run_id, sandbox_root, limit)
        finally:
            self._starting.discard(run_id)

    async def _prepare(
        self, params: wire.RunParams, run_id: str, sandbox_root: str, limit: int
    ) -> _Prepared:
        # From a transcript, maybe megabytes of JSON: read off the event loop.
        history = await asyncio.to_thread(self._history, params.continue_from)
        spec = resolve_model_spec(params.model, self.config.model)
        if spec.provider == "client" and not self.config.client_llm:
            raise CapabilityError(
                "the 'client' model needs the client to declare "
                "capabilities.experimental.cleveragents.llm: true in initialize"
            )
        profile = params.automation_profile or self.config.automation_profile
        mcp_servers = to_configs(params.mcp_servers or [], "params.mcpServers")
        if params.tools is not None:
            # MCP tools may not be listed yet: their server may still be starting.
            unknown = [n for n in params.tools if n not in self.registry and not _reserved(n)]
            if unknown:
                raise ToolNotFoundError(f"params.tools names unknown tool {unknown[0]!r}")
        policy = self.policy_factory(run_id, profile) if self.policy_factory else None
        model = None if spec.provider == "client" else await asyncio.to_thread(self._model, spec)
        pinned = await asyncio.to_thread(PinnedRoot.open, sandbox_root)
        transcript = await asyncio.to_thread(self.store.claim, run_id)  # the last check
        layer = ToolRegistry(parent=self.registry, allow=params.tools)
        run = Run(
            run_id, params.prompt, sandbox_root, dict(params.resource_bindings or {}), layer,
            transcript, self.peer,
        )  # fmt: skip
        caller: LLMCaller = model if model is not None else ClientModel(self.peer, run)
        run.work_done_token = params.work_done_token
        run.pinned = pinned
        cap = OutputCap(
            self.config.state_dir / "outputs" / run_id, self.config.max_tool_output_bytes
        )
        runtime = ToolCallingRuntime(
            layer, ToolRunner(layer, policy=policy, output_filter=cap),
            PacedCaller(caller, self.peer), max_iterations=limit,
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
        return _Prepared(run, runtime, context, history, limit, mcp_servers)

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
        if any(ord(c) < 32 for c in requested):
            raise ParamsError("params.sandboxRoot: must not hold NUL or control characters")
        _check_text(requested, "params.sandboxRoot")
        resolved = Path(requested).resolve()
        for root in roots:
            if resolved == Path(root) or resolved.is_relative_to(root):
                return str(resolved)
        raise SandboxViolationError(f"sandboxRoot {requested!r} is outside every workspace folder")

    def _history(self, continue_from: str | None) -> list[Message] | None:
        """The conversation ``continueFrom`` names: from memory when this daemon ran it,
        else rebuilt from its transcript (a run of an earlier daemon, or of another one).
        Unknown: -32022; still running: -32023; interrupted: -32028."""
        if continue_from is None:
            return None
        messages = self._messages.get(continue_from)
        if messages is not None:
            return messages
        if continue_from in self.active:
            raise RunStateError(f"cannot continue from run {continue_from!r}: it is still running")
        return self.store.conversation(continue_from)

    # -- driving a run ---------------------------------------------------------------

    async def run(self, prepared: _Prepared) -> wire.RunResult:
        """Drive one run to its end; always sends ``run/finished`` and releases it."""
        run = prepared.run
        self.active[run.run_id] = run
        token = _current_run_id.set(run.run_id)
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
            _current_run_id.reset(token)
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

    async def _drive(self, run: Run, prepared: _Prepared) -> wire.RunResult:
        context = prepared.context
        try:
            result = await prepared.runtime.arun_tool_loop(
                run.prompt, context, history=prepared.history, cancel=run.cancel
            )
        except asyncio.CancelledError:
            # The daemon itself is stopping: record it as a cancel.
            run.cancel.cancel(run.cancel.reason or "daemon stopping")
            return self._failed(run, context, "cancelled", self._cancel_error(run))
        except CleverAgentsError as exc:
            return self._failed(run, context, "failed", wire.RunError(exc.code, exc.message))
        except Exception:
            logger.exception("run %s failed", run.run_id)
            message = "internal error (the daemon logged it on stderr)"
            return self._failed(run, context, "failed", wire.RunError(-32603, message))
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
            result.iterations, result.terminated_by_limit, result.duration_ms,
            self._cancel_error(run) if result.cancelled else None, _usage(result.usage),
        )  # fmt: skip

    @staticmethod
    def _cancel_error(run: Run) -> wire.RunError | None:
        """A run cancelled by a signal says which; other cancels carry no error."""
        reason = run.cancel.reason or ""
        if reason.startswith("SIG"):
            return wire.RunError(CANCELLED, f"cancelled: the daemon received {reason}")
        return None

    def _failed(
        self, run: Run, context: ToolActorContext, status: str, error: wire.RunError | None
    ) -> wire.RunResult:
        return wire.RunResult(
            run.run_id, status, "", list(context.tool_call_history),  # type: ignore[arg-type]
            run.iterations, False, 0.0, error,
        )  # fmt: skip

    def _remember(self, run_id: str, messages: list[Message]) -> None:
        """Keep recent conversations for ``continueFrom``, within a budget of messages: a
        long run's would keep hundreds of thousands of objects alive, for the collector
        to scan again and again. Any other is rebuilt from its transcript when needed."""
        if len(messages) > REMEMBERED_MESSAGES // 8:
            return
        self._messages[run_id] = messages
        self._remembered += len(messages)
        while len(self._messages) > 64 or self._remembered > REMEMBERED_MESSAGES:
            self._remembered -= len(self._messages.pop(next(iter(self._messages))))

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


async def _nothing() -> None:
    return None


def _check_text(text: str, field: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParamsError(f"{field}: invalid Unicode (a lone surrogate)") from None


_FRAME_ROOM = MAX_BODY - 64 * 1024
"""What a RunResult may take in its frame: the limit less room for the envelope."""


def _fit(texts: list[str], head_bytes: int) -> int:
    """How many of the oldest records to leave out of a result so that it fits one frame
    (each was already sent in its own ``run/toolCall`` and is in the transcript)."""
    room = _FRAME_ROOM - head_bytes
    if sum(map(len, texts)) + len(texts) <= room // 4:  # 4 bytes per character at most
        return 0
    kept = 0
    for text in reversed(texts):
        size = (len(text) if text.isascii() else len(text.encode("utf-8"))) + 1
        if size > room:
            break
        room -= size
        kept += 1
    return len(texts) - kept
