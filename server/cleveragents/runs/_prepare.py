"""Starting a run: everything that can fail is checked before the run exists.

``prepare`` checks a ``RunRequest``, resolves its model, profile, tools, sandbox root and
the conversation it continues, claims its transcript last, and builds the run: a core
``ToolCallingRuntime`` over a registry layer (shared tools + the run's own), an output
cap, a cancel token and the run as its event sink. A request that fails here fails
alone: no run, no event, no transcript.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ..checkpoints import CheckpointError
from ..llm import get_provider
from ..llm.spec import ModelSpec, resolve_model_spec
from ..mcp import McpServerConfig
from ..tool import (
    CleverAgentsError,
    ContextPolicy,
    JsonRpcCode,
    LLMCaller,
    Message,
    PermissionQuery,
    ToolActorContext,
    ToolCallingRuntime,
    ToolNotFoundError,
    ToolPolicy,
    ToolRegistry,
    ToolRunner,
)
from ..transcripts import META, RunRecorder, RunStateError, valid_run_id
from ..workspace import PinnedRoot, ProfilePolicy, SandboxViolationError, get_profile
from ..workspace.profiles import DEFAULT_PROFILE
from ._checkpoints import CHECKPOINT_NOTE, RunCheckpoints, conflict_words
from ._errors import CapabilityError
from ._instructions import Budget, Instructions, NestedInstructions, instructions
from ._outputs import OutputCap
from ._request import CompactionSettings, ForkFrom, RunRequest
from ._run import Run, RunObserver
from ._settings import warn_if_state_dir_inside

if TYPE_CHECKING:
    from ._service import RunService

RESERVED_PREFIXES = ("builtin/", "mcp:")


def reserved(name: str) -> bool:
    """Whether ``name`` is under a prefix only the service registers (any case)."""
    return name.lower().startswith(RESERVED_PREFIXES)


class RunRequestError(CleverAgentsError):
    """A field of a ``RunRequest`` is wrong: ``field`` is its Python name (a face names
    it as its own wire does), ``problem`` what is wrong with it. Invalid params."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.code = int(JsonRpcCode.INVALID_PARAMS)
        self.field = field
        self.problem = problem


@attrs.define
class Prepared:
    """A run ready to be driven, and what driving it needs."""

    run: Run
    runtime: ToolCallingRuntime
    context: ToolActorContext
    history: list[Message] | None
    limit: int
    mcp_servers: Sequence[McpServerConfig]


async def prepare(
    service: RunService, request: RunRequest, observer: RunObserver | None
) -> Prepared:
    """Check everything that can fail before a run exists, then build it.

    The model is built in a worker thread: a provider SDK's first import takes seconds,
    and a scripted model reads its file."""
    settings = service.settings
    limit = _checked_limit(request, settings.default_max_iterations)
    roots = list(request.roots) if request.roots is not None else list(settings.workspace_folders)
    sandbox_root = _sandbox_root(request.sandbox_root, roots)
    run_id = request.run_id or uuid.uuid4().hex
    if not valid_run_id(run_id):
        raise RunRequestError(
            "run_id", "use 1-128 letters, digits, '.', '_' or '-' (not '.' or '..')"
        )
    if run_id in service.active or run_id in service.starting:
        raise RunStateError(f"run id {run_id!r} is already in use")
    service.starting.add(run_id)  # held across the awaits below; the transcript then holds it
    try:
        return await _prepare(service, request, observer, run_id, sandbox_root, limit)
    finally:
        service.starting.discard(run_id)


async def _prepare(
    service: RunService,
    request: RunRequest,
    observer: RunObserver | None,
    run_id: str,
    sandbox_root: str,
    limit: int,
) -> Prepared:
    settings = service.settings
    # From a transcript, maybe megabytes of JSON: read off the event loop.
    fork = request.fork_from
    if fork is None:
        history = await asyncio.to_thread(service.history, request.continue_from)
    else:
        history = await _fork_history(service, request)
    model: LLMCaller | None = request.model_caller
    spec = model_spec(request.model, settings.model) if model is None else None
    if spec is not None and get_provider(spec.provider).adapter is None:
        raise CapabilityError(
            f"the {spec.provider!r} model is lent by the face that starts the run, and this "
            "one lends none (over LSP: declare capabilities.experimental.cleveragents.llm: "
            "true in initialize)"
        )
    profile = request.automation_profile or settings.automation_profile
    base: ToolRegistry = request.registry if request.registry is not None else service.registry
    if request.tools is not None:
        # MCP tools may not be listed yet: their server may still be starting.
        unknown = [n for n in request.tools if n not in base and not reserved(n)]
        if unknown:
            raise ToolNotFoundError(f"params.tools names unknown tool {unknown[0]!r}")
    policy = _policy(request, profile, settings.custom_profiles)
    checkpointing = request.checkpoints and settings.checkpoints
    if model is None:
        assert spec is not None
        model = await asyncio.to_thread(service.model, spec)
    # The state dir, when the root holds it, is a subtree no built-in tool touches.
    pinned = await asyncio.to_thread(PinnedRoot.open, sandbox_root, (str(settings.state_dir),))
    warn_if_state_dir_inside(settings.state_dir, (sandbox_root,))
    if fork is not None and fork.restore_files:
        await fork_files(service, fork.run_id, fork.iteration, sandbox_root)
    transcript = await asyncio.to_thread(service.store.claim, run_id)  # the last check
    layer = ToolRegistry(parent=base, allow=request.tools)
    run = Run(
        run_id, request.prompt, sandbox_root, layer, RunRecorder(transcript), observer, pinned
    )
    if checkpointing:
        transcript_note = run.recorder.transcript.append
        run.checkpoints = RunCheckpoints(
            service.checkpoint_stores, run_id, sandbox_root, run.on_event,
            lambda line: transcript_note(CHECKPOINT_NOTE, line),
        )  # fmt: skip
        policy = GatedPolicy.around(policy, before_call=run.checkpoints.before_call)
    cap = OutputCap(service.store.state, run_id, settings.max_tool_output_bytes)
    enabled = settings.instructions if request.instructions is None else request.instructions
    budget = Budget()
    found = await asyncio.to_thread(
        instructions, enabled=enabled, pinned=pinned, sandbox_root=sandbox_root,
        system_prompt=request.system_prompt, history=history, clock=settings.clock,
        budget=budget,
    )  # fmt: skip
    output_filter = NestedInstructions(sandbox_root, budget, cap) if enabled else cap
    runtime = ToolCallingRuntime(
        layer, ToolRunner(layer, policy=policy, output_filter=output_filter), model,
        max_iterations=limit, system_prompt=found.text, sink=run,
        pace=request.pace, context=await _context_policy(service, request.compaction, cap),
        limits=request.limits,
    )  # fmt: skip
    context = ToolActorContext(
        plan_id=request.plan_id, phase=request.phase, sandbox_root=sandbox_root,
        automation_profile=profile, resource_bindings=dict(request.resource_bindings or {}),
        project_resources=dict(request.project_resources or {}),
    )  # fmt: skip
    _write_meta(
        run,
        _described(request, spec),
        request.continue_from,
        profile or DEFAULT_PROFILE,
        fork,
        found,
    )
    return Prepared(run, runtime, context, history, limit, request.mcp_servers)


async def _fork_history(service: RunService, request: RunRequest) -> list[Message]:
    """The conversation a fork starts from: run ``fork_from.run_id``'s up to and
    including its iteration ``fork_from.iteration`` (and the runs that one continued)."""
    fork = request.fork_from
    assert fork is not None
    if request.continue_from is not None:
        raise RunRequestError("fork_from", "cannot be given with continue_from")
    if fork.iteration < 0:
        raise RunRequestError("fork_from.iteration", f"must be at least 0, got {fork.iteration}")
    if fork.run_id in service.active:
        raise RunStateError(f"cannot fork run {fork.run_id!r}: it is still running")
    return await asyncio.to_thread(service.store.conversation, fork.run_id, fork.iteration)


async def fork_files(service: RunService, run_id: str, iteration: int, sandbox_root: str) -> None:
    """Put the files back as run ``run_id`` left them after ``iteration``, under the
    revert's rules: a conflict refuses the fork (``CheckpointError`` naming the paths),
    and nothing is changed."""
    root, _ = await asyncio.to_thread(service._run_root, run_id)
    if root is not None and not await asyncio.to_thread(os.path.samefile, root, sandbox_root):
        raise RunRequestError(
            "fork_from.restore_files",
            f"run {run_id!r} worked in {root}, not in this run's sandbox root {sandbox_root}",
        )
    result = await service.revert(run_id, to_iteration=iteration)
    if result.conflicts:
        raise CheckpointError(
            f"cannot restore the files of run {run_id!r} after iteration {iteration}: changed "
            f"since its last checkpoint: {conflict_words(result.conflicts)} (revert it with "
            "force first, or fork without restoreFiles)"
        )


async def _context_policy(
    service: RunService, settings: CompactionSettings, cap: OutputCap
) -> ContextPolicy:
    """The run's context budget: the request's settings, the window from the model, and
    the run's outputs folder keeping each pruned output whole."""
    if not settings.enabled:
        return ContextPolicy(enabled=False)
    summary_model = None
    if settings.model is not None:
        spec = model_spec(settings.model, None)
        if get_provider(spec.provider).adapter is None:
            raise RunRequestError("compaction.model", "must be a model this service builds")
        summary_model = await asyncio.to_thread(service.model, spec)
    try:
        return ContextPolicy(
            compact_at=settings.compact_at,
            keep_recent_iterations=settings.keep_recent_iterations,
            summary_model=summary_model,
            keep_output=cap.keep,
        )
    except ValueError as exc:
        raise RunRequestError("compaction", str(exc)) from None


def _policy(request: RunRequest, profile_name: str | None, custom: Any) -> ToolPolicy:
    """The profile's policy (an unknown profile fails the request here), gated by the
    face's pace and told when a call may run."""
    profile = get_profile(profile_name or DEFAULT_PROFILE, dict(custom))
    inner = ProfilePolicy(profile, ask=request.ask)
    if request.pace is None and request.on_authorized is None:
        return inner
    return GatedPolicy(inner, request.pace, request.on_authorized)


class GatedPolicy:
    """Waits for the face's pace, asks the profile, and tells the face when a call is
    allowed to run, then the run's checkpoints (``before_call``: a snapshot before the
    run's first mutating call)."""

    def __init__(
        self,
        inner: ProfilePolicy,
        pace: Callable[[], Awaitable[None]] | None,
        on_authorized: Callable[[PermissionQuery], Awaitable[None]] | None,
        before_call: Callable[[PermissionQuery], Awaitable[None]] | None = None,
    ) -> None:
        self._inner = inner
        self._pace = pace
        self._on_authorized = on_authorized
        self._before_call = before_call

    @classmethod
    def around(
        cls, policy: ToolPolicy, *, before_call: Callable[[PermissionQuery], Awaitable[None]]
    ) -> GatedPolicy:
        """``policy`` (a ``ProfilePolicy`` or a ``GatedPolicy`` over one) with
        ``before_call`` awaited once a call is allowed."""
        if isinstance(policy, GatedPolicy):
            return cls(policy._inner, policy._pace, policy._on_authorized, before_call)
        assert isinstance(policy, ProfilePolicy)
        return cls(policy, None, None, before_call)

    async def authorize(self, query: PermissionQuery, /) -> str | None:
        if self._pace is not None:
            await self._pace()
        refusal = self._inner.authorize(query)
        if not isinstance(refusal, str | None):
            refusal = await refusal
        if refusal is None and self._on_authorized is not None:
            await self._on_authorized(query)
        if refusal is None and self._before_call is not None:
            await self._before_call(query)
        return refusal


def model_spec(model: object, default: object) -> ModelSpec:
    """The request's model spec, else the service's (a spec object, a string or a dict)."""
    for candidate in (model, default):
        if isinstance(candidate, ModelSpec):
            return candidate
        if candidate is not None and candidate != "":
            return resolve_model_spec(candidate)
    return resolve_model_spec()


def _described(request: RunRequest, spec: ModelSpec | None) -> str:
    """The model as the transcript names it: a lent model by the spec it was lent for."""
    if spec is not None:
        return spec.describe()
    model = request.model
    if isinstance(model, ModelSpec):
        return model.describe()
    if isinstance(model, str):
        return model
    provider = model.get("provider") if model is not None else None
    return str(provider or "client")


def _write_meta(
    run: Run,
    model: str,
    continue_from: str | None,
    profile: str,
    fork: ForkFrom | None,
    found: Instructions,
) -> None:
    """The transcript's first line: what the events do not carry (the model and the
    profile, which ``cleveragents run --continue`` reuses, the instructions used, and a
    fork's origin, which a later ``continueFrom`` follows)."""
    run.started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    meta: dict[str, object] = {
        "runId": run.run_id, "prompt": run.prompt, "startedAt": run.started_at,
        "model": model, "continueFrom": continue_from, "profile": profile,
        "instructions": found.meta(),
    }  # fmt: skip
    if fork is not None:
        meta["forkFrom"] = {"runId": fork.run_id, "iteration": fork.iteration}
    run.recorder.transcript.append(META, meta)


def _checked_limit(request: RunRequest, default_limit: int) -> int:
    """The run's iteration limit, once its prompts are checked."""
    if not request.prompt.strip():
        raise RunRequestError("prompt", "must not be empty")
    check_text(request.prompt, "prompt")
    if request.system_prompt is not None:
        check_text(request.system_prompt, "system_prompt")
    limit = request.max_iterations
    if limit is None:
        limit = default_limit
    if limit < 1:
        raise RunRequestError("max_iterations", f"must be at least 1, got {limit}")
    return limit


def _sandbox_root(requested: str | None, roots: Sequence[str]) -> str:
    if not roots:
        raise SandboxViolationError(
            "no workspace folder: initialize must name workspaceFolders or rootUri"
        )
    if requested is None:
        return roots[0]
    if any(ord(c) < 32 for c in requested):
        raise RunRequestError("sandbox_root", "must not hold NUL or control characters")
    check_text(requested, "sandbox_root")
    resolved = Path(requested).resolve()
    for root in roots:
        if resolved == Path(root) or resolved.is_relative_to(root):
            return str(resolved)
    raise SandboxViolationError(f"sandboxRoot {requested!r} is outside every workspace folder")


def check_text(text: str, field: str) -> None:
    """Refuse a lone surrogate (naming the field): it cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RunRequestError(field, "invalid Unicode (a lone surrogate)") from None
