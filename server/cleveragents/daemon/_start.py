"""Starting a run: everything that can fail is checked before the run exists.

``Starter.prepare`` checks a ``run/start``'s params, resolves its model, profile, tools,
sandbox root and the conversation it continues, claims its transcript last, and builds
the run: a core ``ToolCallingRuntime`` over a registry layer (shared tools + the run's
own), an output cap, a cancel token and an event sink. A ``run/start`` that fails here
fails alone: no run, no notification, no transcript.

It also keeps what runs share across their starts: the models of HTTP providers (their
connection pools) and the recent conversations ``continueFrom`` continues.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from ..llm.spec import ModelSpec, create_caller, resolve_model_spec
from ..mcp import McpServerConfig
from ..protocol import ParamsError, wire
from ..tool import (
    LLMCaller,
    LLMRequest,
    LLMResponse,
    Message,
    ToolActorContext,
    ToolCallingRuntime,
    ToolNotFoundError,
    ToolRegistry,
    ToolRunner,
)
from ..transcripts import META, RunStateError, TranscriptStore, valid_run_id
from ..workspace import PinnedRoot, SandboxViolationError
from ._client_model import ClientModel
from ._client_tools import reserved
from ._config import DaemonConfig, PolicyFactory
from ._errors import CapabilityError
from ._mcp import to_configs
from ._outputs import OutputCap
from ._peer import Peer
from ._run import Run, RunSink

REMEMBERED_MESSAGES = 16_000
"""Messages of finished runs kept in memory for ``continueFrom`` (see ``Conversations``)."""


@attrs.define
class Prepared:
    """A run ready to be driven, and what driving it needs."""

    run: Run
    runtime: ToolCallingRuntime
    context: ToolActorContext
    history: list[Message] | None
    limit: int
    mcp_servers: list[McpServerConfig] = attrs.field(factory=list)


class Conversations:
    """Recent conversations for ``continueFrom``, within a budget of messages: a long
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


def _is_async(caller: object) -> bool:
    """Whether calling ``caller`` returns a coroutine (a function or a callable object)."""
    return inspect.iscoroutinefunction(caller) or inspect.iscoroutinefunction(
        getattr(caller, "__call__", None)  # noqa: B004 - a callable object's method
    )


class PacedCaller:
    """The run's model, called only once the client has read what was sent (backpressure:
    a client that stops reading stalls its own runs, not the daemon's memory)."""

    def __init__(self, caller: LLMCaller, peer: Peer) -> None:
        self._caller = caller
        self._peer = peer
        self._async = _is_async(caller)
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


class Starter:
    """Prepares runs for the run manager (see the module docstring)."""

    def __init__(
        self,
        config: DaemonConfig,
        registry: ToolRegistry,
        peer: Peer,
        policy_factory: PolicyFactory | None,
        active: dict[str, Run],
        store: Callable[[], TranscriptStore],
    ) -> None:
        self.config = config
        self.registry = registry
        self.peer = peer
        self.policy_factory = policy_factory
        self.active = active
        self.store = store
        self.conversations = Conversations()
        self._models: dict[str, LLMCaller] = {}
        self._starting: set[str] = set()

    async def prepare(self, params: wire.RunParams, roots: Sequence[str]) -> Prepared:
        """Check everything that can fail before a run exists, then build it.

        The model is built in a worker thread: a provider SDK's first import takes
        seconds, and a scripted model reads its file."""
        limit = _checked_limit(params, self.config.default_max_iterations)
        sandbox_root = _sandbox_root(params.sandbox_root, roots)
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
    ) -> Prepared:
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
            unknown = [n for n in params.tools if n not in self.registry and not reserved(n)]
            if unknown:
                raise ToolNotFoundError(f"params.tools names unknown tool {unknown[0]!r}")
        policy = self.policy_factory(run_id, profile) if self.policy_factory else None
        model = None if spec.provider == "client" else await asyncio.to_thread(self._model, spec)
        pinned = await asyncio.to_thread(PinnedRoot.open, sandbox_root)
        transcript = await asyncio.to_thread(self.store().claim, run_id)  # the last check
        layer = ToolRegistry(parent=self.registry, allow=params.tools)
        run = Run(
            run_id, params.prompt, sandbox_root, dict(params.resource_bindings or {}), layer,
            transcript, self.peer, work_done_token=params.work_done_token, pinned=pinned,
        )  # fmt: skip
        caller: LLMCaller = model if model is not None else ClientModel(self.peer, run)
        cap = OutputCap(
            self.config.state_dir / "outputs" / run_id, self.config.max_tool_output_bytes
        )
        runtime = ToolCallingRuntime(
            layer, ToolRunner(layer, policy=policy, output_filter=cap),
            PacedCaller(caller, self.peer), max_iterations=limit,
            system_prompt=params.system_prompt, sink=RunSink(run, limit),
        )  # fmt: skip
        context = ToolActorContext(
            plan_id=params.plan_id, phase=params.phase, sandbox_root=sandbox_root,
            automation_profile=profile, resource_bindings=run.resource_bindings,
            project_resources=dict(params.project_resources or {}),
        )  # fmt: skip
        _write_meta(run, spec, params.continue_from)
        return Prepared(run, runtime, context, history, limit, mcp_servers)

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

    async def close_models(self) -> None:
        """Close the reused HTTP callers' SDK clients (their connection pools); a later
        run opens new ones."""
        models, self._models = list(self._models.values()), {}
        for caller in models:
            aclose = getattr(caller, "aclose", None)
            if aclose is not None:
                await aclose()

    def _history(self, continue_from: str | None) -> list[Message] | None:
        """The conversation ``continueFrom`` names: from memory when this daemon ran it,
        else rebuilt from its transcript (a run of an earlier daemon, or of another one).
        Unknown: -32022; still running: -32023; interrupted: -32028."""
        if continue_from is None:
            return None
        messages = self.conversations.messages.get(continue_from)
        if messages is not None:
            return messages
        if continue_from in self.active:
            raise RunStateError(f"cannot continue from run {continue_from!r}: it is still running")
        return self.store().conversation(continue_from)


def _write_meta(run: Run, spec: ModelSpec, continue_from: str | None) -> None:
    """The transcript's first line: what the notifications do not carry."""
    run.started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    run.transcript.append(
        META,
        {"runId": run.run_id, "prompt": run.prompt, "startedAt": run.started_at,
         "model": spec.describe(), "continueFrom": continue_from},
    )  # fmt: skip


def _checked_limit(params: wire.RunParams, default_limit: int) -> int:
    """The run's iteration limit, once its prompts are checked."""
    if not params.prompt.strip():
        raise ParamsError("params.prompt: must not be empty")
    check_text(params.prompt, "params.prompt")
    if params.system_prompt is not None:
        check_text(params.system_prompt, "params.systemPrompt")
    limit = params.max_iterations
    if limit is None:
        limit = default_limit
    if limit < 1:
        raise ParamsError(f"params.maxIterations: must be at least 1, got {limit}")
    return limit


def _sandbox_root(requested: str | None, roots: Sequence[str]) -> str:
    if not roots:
        raise SandboxViolationError(
            "no workspace folder: initialize must name workspaceFolders or rootUri"
        )
    if requested is None:
        return roots[0]
    if any(ord(c) < 32 for c in requested):
        raise ParamsError("params.sandboxRoot: must not hold NUL or control characters")
    check_text(requested, "params.sandboxRoot")
    resolved = Path(requested).resolve()
    for root in roots:
        if resolved == Path(root) or resolved.is_relative_to(root):
            return str(resolved)
    raise SandboxViolationError(f"sandboxRoot {requested!r} is outside every workspace folder")


def check_text(text: str, field: str) -> None:
    """Refuse a lone surrogate (-32602 naming the field): it cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParamsError(f"{field}: invalid Unicode (a lone surrogate)") from None
