"""What the run service answers for its MCP servers (``cleveragents.mcp.ClientHooks``):
a call's progress becomes the run's ``ToolCallProgress`` event, an elicitation goes to
the face's user with the run it is about, and the roots are the workspace folders.

A face lends what only it can do as an ``McpClientSide``: how to ask its user
(``elicit``; without it every elicitation is declined) and the folders of the moment
(``roots``; default the settings' workspace folders). The run a server request is about
is the one whose tool call was in flight on that connection, found by the call's cancel
token (a shared server's tools are called from any run).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from ..llm import ModelConfigError, ModelSpec, get_provider
from ..mcp import (
    ClientHooks,
    Elicitation,
    ElicitationAnswer,
    Sampling,
    SamplingAnswer,
    SamplingRefused,
)
from ..tool import (
    CallSettings,
    CancelToken,
    CleverAgentsError,
    LLMCaller,
    LLMRequest,
    LLMResponse,
    Message,
    PermissionQuery,
    ToolActorContext,
    ToolCallContext,
    ToolCallProgress,
    ToolPolicy,
    ToolSpec,
    Usage,
    UsageLimits,
)

if TYPE_CHECKING:
    from ._run import Run
    from ._service import RunService

__all__ = [
    "Elicit",
    "Elicitation",
    "ElicitationAnswer",
    "McpClientSide",
    "Sampler",
    "ServiceHooks",
]

Elicit = Callable[[str | None, Elicitation], Awaitable[ElicitationAnswer]]
"""``elicit(run_id, request)``: ask the user (``run_id`` ``None`` outside a run)."""


@attrs.frozen(kw_only=True)
class McpClientSide:
    """What a face lends the MCP servers of its service."""

    elicit: Elicit | None = None
    """Asks the user; ``None``: every elicitation is declined."""
    roots: Callable[[], Sequence[str]] | None = None
    """The workspace folders now (absolute paths); default the settings'."""


class ServiceHooks(ClientHooks):
    """The run service's answers to its MCP servers (see the module docstring)."""

    def __init__(
        self,
        service: RunService,
        side: McpClientSide,
        roots: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        self._service = service
        self._side = side
        self._roots = roots if roots is not None else side.roots

    def _run(self, call: ToolCallContext | None) -> Run | None:
        if call is None:
            return None
        for run in self._service.active.values():
            if run.cancel is call.cancel:
                return run
        return None

    def roots(self) -> list[str]:
        roots = self._roots
        return list(roots() if roots is not None else self._service.settings.workspace_folders)

    def progress(
        self, call: ToolCallContext, progress: float, total: float | None, message: str | None
    ) -> None:
        run = self._run(call)
        if run is not None:
            run.on_event(ToolCallProgress(call.call_id, progress, total, message))

    async def elicit(self, call: ToolCallContext | None, request: Elicitation) -> ElicitationAnswer:
        elicit = self._side.elicit
        if elicit is None:
            return ElicitationAnswer("decline")
        run = self._run(call)
        return await elicit(run.run_id if run is not None else None, request)

    async def sample(self, call: ToolCallContext | None, request: Sampling) -> SamplingAnswer:
        """The run's model answers, once its profile allows ``mcp:SERVER/sampling`` (a
        write: asked under ``supervised``, the prompt showing the messages); outside a
        run, the service's default model under its default profile, nobody asked."""
        run = self._run(call)
        if run is not None and run.sampler is not None:
            return await run.sampler.sample(call, request)
        return await self._outside_a_run().sample(None, request)

    def _outside_a_run(self) -> Sampler:
        """Outside a run: the service's default model under its default profile, with
        nobody to ask (what the profile would ask about is refused)."""
        from ..workspace import ProfilePolicy, get_profile
        from ..workspace.profiles import DEFAULT_PROFILE
        from ._prepare import model_spec

        settings = self._service.settings
        try:
            model = self._service.model(model_spec(None, settings.model))
            name = settings.automation_profile or DEFAULT_PROFILE
            profile = get_profile(name, dict(settings.custom_profiles))
        except CleverAgentsError as exc:
            raise SamplingRefused(f"outside a run, with the default model: {exc}") from None
        folders = settings.workspace_folders
        context = ToolActorContext(
            sandbox_root=folders[0] if folders else None, automation_profile=profile.name
        )
        return Sampler(ProfilePolicy(profile), model, context)


@attrs.define
class Sampler:
    """One run's answer to its MCP servers' sampling requests: its policy decides, as
    for a call of the virtual tool ``mcp:SERVER/sampling``, then its model answers with
    the request's own settings for that call (``CallSettings``).

    The request's ``modelPreferences`` are advisory (the MCP spec says so) and the user
    chose the run's model: it answers whatever the server hints. What its answers spend
    is kept in ``usage``, which the run's result adds to its own."""

    policy: ToolPolicy
    model: LLMCaller
    context: ToolActorContext
    limits: UsageLimits | None = None
    """The run's limits: once its usage reaches a token limit, sampling is refused."""
    used: Callable[[], Usage | None] = lambda: None
    """The tokens the run's own model calls reported so far (its finished iterations)."""
    usage: Usage | None = None
    """The tokens the answers spent so far (``None``: none reported)."""
    _specs: dict[str, ToolSpec] = attrs.field(factory=dict)

    async def sample(self, call: ToolCallContext | None, request: Sampling) -> SamplingAnswer:
        """``call``: the tool call the server was serving (``None`` outside a run)."""
        limits = self.limits
        if limits is not None and limits.tokens_reached(self.spent()):
            raise SamplingRefused("the run reached its token limit")
        spec = self._spec(request.server)
        call_id = f"{call.call_id}/sampling" if call is not None else "sampling"
        iteration = call.iteration if call is not None else 0
        cancel = call.cancel if call is not None else CancelToken()
        shown: dict[str, object] = {
            "messages": [{"role": role, "text": text} for role, text in request.messages],
            "maxTokens": request.max_tokens,
        }
        if request.system_prompt is not None:
            shown["systemPrompt"] = request.system_prompt
        if request.temperature is not None:
            shown["temperature"] = request.temperature
        if request.stop_sequences:
            shown["stopSequences"] = list(request.stop_sequences)
        query = PermissionQuery(spec, shown, call_id, iteration, self.context, shown)
        refusal = self.policy.authorize(query)
        if inspect.isawaitable(refusal):
            refusal = await refusal
        if refusal is not None:
            raise SamplingRefused(f"not allowed: {refusal}")
        messages = [Message("system", request.system_prompt)] if request.system_prompt else []
        for role, text in request.messages:
            messages.append(Message("user" if role == "user" else "assistant", text))
        settings = CallSettings(request.max_tokens, request.temperature, request.stop_sequences)
        llm = LLMRequest(
            messages, [], max(iteration, 1), self.context, cancel, _ignore,
            purpose="sampling", settings=settings,
        )  # fmt: skip
        answer = self.model(llm)
        response = await answer if inspect.isawaitable(answer) else answer
        if response.usage is not None:
            self.usage = response.usage if self.usage is None else self.usage + response.usage
        return SamplingAnswer(
            response.content, answering_model(self.model, response),
            _STOP_REASONS.get(response.stop_reason or "", "endTurn"),
        )  # fmt: skip

    def spent(self) -> Usage | None:
        """The run's usage so far: its finished iterations' and the answers'."""
        used, answers = self.used(), self.usage
        if used is None or answers is None:
            return answers if used is None else used
        return used + answers

    def _spec(self, server: str) -> ToolSpec:
        spec = self._specs.get(server)
        if spec is None:
            spec = ToolSpec(
                f"mcp:{server}/sampling",
                f"MCP server {server} asks the run's model to answer these messages",
                {"type": "object"}, _never_called, kind="write",
            )  # fmt: skip
            self._specs[server] = spec
        return spec


_STOP_REASONS = {
    "length": "maxTokens",  # OpenAI's chat completions
    "max_tokens": "maxTokens",  # Anthropic's
    "MAX_TOKENS": "maxTokens",  # Gemini's
    "max_output_tokens": "maxTokens",  # the Responses API's incomplete reason
    "stop_sequence": "stopSequence",  # Anthropic's (the others say a plain stop)
}
"""A provider's stop reason as MCP names it; any other is ``endTurn``."""


def answering_model(model: LLMCaller, response: LLMResponse) -> str:
    """The model that answered, as MCP's ``model`` names it: the provider's model id
    (``claude-sonnet-4-5``) from the adapter's stamp on the answer (``provider:model``)
    or the caller's own; a provider that takes no model id by its name (``scripted``,
    never a script's path); ``cleveragents`` for a caller that says nothing."""
    origin = response.origin or getattr(model, "origin", None)
    if not isinstance(origin, str) or not origin:
        spec = getattr(model, "spec", None)
        origin = spec.describe() if isinstance(spec, ModelSpec) else None
    if origin is None:
        return "cleveragents"
    name, _, model_id = origin.partition(":")
    try:
        takes = get_provider(name).takes
    except ModelConfigError:  # a caller's own stamp, of no registered provider
        return origin
    return model_id if takes == "model" and model_id else name


def _ignore(text: str) -> None:
    return None


def _never_called(inputs: dict[str, object]) -> object:
    raise AssertionError("the sampling permission's spec is never called")
