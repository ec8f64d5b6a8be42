"""``anthropic:MODEL``: the provider's registration, and its ``LLMCaller`` over the
messages API, always streamed.

Owns the request body and the client; the wire format is the ``anthropic`` codec's, and
retries, error messages and cancellation are ``_retry``'s.

The ``anthropic`` SDK is an optional extra, imported when a caller is built, never when
``cleveragents.llm`` is. The SDK's own retries are off (``max_retries=0``) so that one
policy, with its bounds and its refusal to repeat streamed text, applies everywhere.
The key is always passed explicitly, so the SDK never falls back to profiles on disk.

Two things of the body are this module's own (docs/models.md says which and why):

- **Thinking** (:func:`thinking_plan`): a spec's ``reasoning`` becomes ``thinking``.
  Claude 4.6 and later take adaptive thinking (the model decides how much, steered by
  ``output_config.effort``) and refuse, from 4.7, a fixed budget; earlier models and
  Anthropic-compatible servers take ``{"type": "enabled", "budget_tokens"}`` only, and
  Claude 4 models think between tool calls only with the interleaved-thinking beta.
  Without ``reasoning`` the body has no thinking field at all.
- **Prompt caching** (:func:`mark_breakpoints`): ``cache_control`` breakpoints on the
  last tool, the system prompt, the last message and the one two before it, so that
  each iteration of a tool loop reads the previous one's prefix from the cache. A
  spec's ``cache: false`` places none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

from cleveragents.tool import LLMRequest

from .._base import SdkCaller
from .._providers import Provider
from ..spec import ModelSpec

DEFAULT_MAX_TOKENS = 4096
"""The messages API requires ``max_tokens``; used when the spec sets none (with room for
thinking added when reasoning is on)."""

EFFORT_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 8192, "high": 16384}
"""Thinking tokens per neutral effort: ``budget_tokens`` where the model takes a budget
(1,024 is the API's minimum), and the room left for thinking in the default
``max_tokens`` everywhere."""
DEFAULT_BUDGET_EFFORT = "medium"
"""The effort whose budget a model that takes budgets gets when the spec names none."""
EFFORT_LEVELS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
"""Neutral effort -> ``output_config.effort`` for adaptive thinking (which has no
minimal level)."""
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
"""Lets Claude 4 models think between tool calls with a budget (and lets the budget
pass ``max_tokens``); adaptive thinking interleaves without it."""
ADAPTIVE_SINCE = (4, 6)
"""The first Claude version that takes ``{"type": "adaptive"}``."""

_CLAUDE_VERSION = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:[-.](\d)(?!\d))?")
_NO_CACHE_MARK = frozenset({"thinking", "redacted_thinking"})
"""Blocks that may not carry ``cache_control`` (they are cached as part of the prefix)."""


@attrs.frozen
class ThinkingPlan:
    """What a spec's ``reasoning`` adds to a request."""

    thinking: dict[str, Any]
    """The body's ``thinking``."""
    effort: str | None
    """``output_config.effort``; ``None``: the model's default."""
    room: int
    """Tokens the thinking may take: added to the default ``max_tokens``."""
    beta: str | None
    """An ``anthropic-beta`` header the request needs."""


def claude_version(model: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a Claude model id (``claude-sonnet-4-5-20250929`` ->
    ``(4, 5)``, ``claude-3-7-sonnet-latest`` -> ``(3, 7)``); ``None`` when it names
    none (``claude-mythos-preview``, or not a Claude id at all)."""
    found = _CLAUDE_VERSION.search(model)
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2) or 0)


def takes_adaptive(model: str) -> bool:
    """Whether the model thinks adaptively: Claude 4.6 and later, and Claude ids that
    carry no version (newer names); not earlier Claude models, nor the models of
    Anthropic-compatible servers, which take a budget only."""
    if "claude-" not in model:
        return False
    version = claude_version(model)
    return version is None or version >= ADAPTIVE_SINCE


def thinking_plan(spec: ModelSpec) -> ThinkingPlan | None:
    """How the spec's ``reasoning`` is asked for (``None``: not at all).

    ``budgetTokens`` asks for budgeted thinking on any model (Claude 4.7 and later
    refuse it, in the API's words); else a model that thinks adaptively gets
    ``adaptive`` with the effort as ``output_config.effort``, and one that takes budgets
    the effort's budget from :data:`EFFORT_BUDGETS`. ``summary`` asks for readable
    (summarized) thinking, which newer models omit by default.
    """
    reasoning = spec.reasoning
    if reasoning is None:
        return None
    display: dict[str, Any] = {"display": "summarized"} if reasoning.summary else {}
    model = spec.model or ""
    if reasoning.budget_tokens is None and takes_adaptive(model):
        effort = reasoning.effort
        return ThinkingPlan(
            {"type": "adaptive", **display},
            EFFORT_LEVELS[effort] if effort else None,
            EFFORT_BUDGETS[effort or "high"],
            None,
        )
    budget = reasoning.budget_tokens or EFFORT_BUDGETS[reasoning.effort or DEFAULT_BUDGET_EFFORT]
    version = claude_version(model) if "claude-" in model else None
    beta = INTERLEAVED_THINKING_BETA if version is not None and version >= (4, 0) else None
    return ThinkingPlan({"type": "enabled", "budget_tokens": budget, **display}, None, budget, beta)


def mark_breakpoints(
    system: str | None, tools: Sequence[dict[str, Any]], messages: list[dict[str, Any]]
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Prompt-cache breakpoints: the system prompt (as one text block) and the tools
    marked, as new objects; the messages marked in place (the codec built them for
    this request).

    The API caches the prefix (tools, then system, then messages) up to each breakpoint
    and allows four: the last tool and the system prompt keep what runs share; the last
    message caches the conversation so far; and the message two before it is where the
    previous request of a tool loop put its own last breakpoint, read back whatever
    number of blocks the iteration added (the API looks back only about 20 blocks from
    a breakpoint for an earlier cached prefix).
    """
    marked_tools = [*tools[:-1], _marked(tools[-1])] if tools else list(tools)
    marked_system: str | list[dict[str, Any]] | None = system
    if system:  # an empty text block may not carry a breakpoint (nor be sent)
        marked_system = [_marked({"type": "text", "text": system})]
    for message in (messages[-3], messages[-1]) if len(messages) >= 3 else messages[-1:]:
        _mark_last_block(message)
    return marked_system, marked_tools


def _marked(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": {"type": "ephemeral"}}


def _mark_last_block(message: dict[str, Any]) -> None:
    """The message's last block that may carry a breakpoint gets one."""
    content = message.get("content")
    if not isinstance(content, list):
        return
    for index in range(len(content) - 1, -1, -1):
        block = content[index]
        if block.get("type") in _NO_CACHE_MARK or (
            block.get("type") == "text" and not block.get("text")
        ):
            continue
        content[index] = _marked(block)
        return


class AnthropicCaller(SdkCaller):
    """Calls one Claude model; one instance serves every call of the runs that use its spec.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

    def __init__(self, spec: ModelSpec, **tuning: Any) -> None:
        super().__init__(spec, **tuning)
        self._thinking = thinking_plan(spec)

    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for one call (never the key)."""
        spec = self.spec
        plan = self._thinking
        history = self._router.messages(request.messages)
        system: str | list[dict[str, Any]] | None = history.system
        tools = self.provider_tools(request)
        if spec.cache:
            system, tools = mark_breakpoints(history.system, tools, history.messages)
        max_tokens = spec.max_tokens or DEFAULT_MAX_TOKENS + (plan.room if plan else 0)
        settings = request.settings
        if settings is not None and settings.max_tokens is not None:
            # The call's cap is the answer's, in place of our default: thinking keeps its
            # room on top (the API wants max_tokens above a thinking budget), within the
            # spec's own cap.
            asked = settings.max_tokens + (plan.room if plan else 0)
            max_tokens = asked if spec.max_tokens is None else min(spec.max_tokens, asked)
        body: dict[str, Any] = {
            "model": spec.model,
            "max_tokens": max_tokens,
            "messages": history.messages,
            "stream": True,
        }
        if system is not None:
            body["system"] = system
        if tools:
            body["tools"] = tools
        # With thinking on, a call's own temperature is advisory: the API refuses any
        # but 1 beside thinking. The spec's is sent as set.
        temperature = self.temperature(request) if plan is None else spec.temperature
        if temperature is not None:
            # Recent SDKs dropped the keyword; the API still takes the field (and refuses
            # it beside thinking in its own words, which is the run's error).
            body["extra_body"] = {"temperature": temperature}
        if settings is not None and settings.stop:
            body["stop_sequences"] = list(settings.stop)
        if plan is not None:
            body["thinking"] = plan.thinking
            if plan.effort is not None:
                body["output_config"] = {"effort": plan.effort}
            if plan.beta is not None:
                body["extra_headers"] = {"anthropic-beta": plan.beta}
        return body

    def _new_client(self, key: str) -> Any:
        return self._sdk.AsyncAnthropic(
            api_key=key, base_url=self.base_url, timeout=self.spec.timeout_s, max_retries=0
        )

    async def _close_client(self, client: Any) -> None:
        await client.close()

    def _open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        return client.messages.create(**body)


PROVIDER = Provider(
    name="anthropic",
    summary="the Anthropic messages API",
    example="claude-sonnet-4-5",
    key_envs=("ANTHROPIC_API_KEY",),
    package="anthropic",
    extra="anthropic",
    loggers=(
        "anthropic",
        "anthropic._base_client",
        "anthropic._response",
        "anthropic._legacy_response",
        "anthropic._tracing",
    ),
    codec="anthropic",
    adapter=AnthropicCaller,
)
