"""The context budget of a run: how big the next request is, and what is done before it
would overflow the model's context window.

Owns the estimate and the default compaction; the loop (``_loop_state``, ``_runtime``)
asks before every model call. The estimate starts from what the provider last reported
(the input tokens of the request just sent, cached ones included) and adds an estimate of
what was appended since: ``BYTES_PER_TOKEN`` bytes of UTF-8 per token, plus a few tokens
per message. A model that reports no usage is estimated whole, tools included.

When the estimate passes ``compact_at`` of the window (less the room kept for the
answer), the default policy first **prunes** (the outputs of tool calls older than the
last ``keep_recent_iterations`` become a short stub naming the tool, the size cut and,
when a keeper is given, where the whole output is kept), then, if still over,
**summarises** (the model is asked to summarise everything before the kept iterations
but the system prompt and the latest user message, which stay). Pruning keeps every
call/result pair; the summary replaces whole iterations, so the kept ones keep theirs,
with their provider state. A library user may give a history processor of their own,
called before every model call instead.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import attrs

from ._types import LLMCaller, Message, ToolSchema

__all__ = [
    "BYTES_PER_TOKEN",
    "ContextPolicy",
    "ContextUsage",
    "HistoryProcessor",
    "OutputKeeper",
    "estimate_message_tokens",
    "estimate_text_tokens",
]

BYTES_PER_TOKEN = 4
"""The estimate's rate: English text and JSON run at about four bytes of UTF-8 per token
for the models we know; code and other scripts run denser, so the budget compacts a
little early rather than late."""
MESSAGE_OVERHEAD = 4
"""Tokens a message costs beyond its text (role, separators)."""
MEDIUM_TOKENS = 1600
"""Tokens one image or audio clip of a tool result is counted as: what a provider
charges for a large image (about 1.15 megapixels), not its base64's length."""
PRUNE_MIN_BYTES = 512
"""A tool output shorter than this is left as it is: its stub would save nothing."""
SUMMARY_INPUT_SHARE = 0.5
"""The summary request holds at most this share of the window."""
SUMMARY_MESSAGE_BYTES = 8_000
"""Each message is cut to this many bytes in the text the summariser reads."""

DEFAULT_SUMMARY_PROMPT = (
    "You compact the history of an agent's tool-calling run so that it can go on within "
    "its context window. Summarise the conversation below for the agent itself: the "
    "user's goal, what was done (tools called, files read or changed, commands run, "
    "their results), what was learned, decisions taken and what remains to do. Keep "
    "names, paths, identifiers and numbers exact. Answer with the summary only."
)

Strategy = Literal["prune", "summary"]


@attrs.frozen
class ContextUsage:
    """What a history processor is told before a model call."""

    estimate: int
    """The estimated size of the next request, in tokens."""
    window: int | None
    """The model's context window, in tokens (``None``: unlimited)."""
    limit: int | None
    """The size past which the default policy compacts."""
    iteration: int
    """The iteration about to call the model."""


HistoryProcessor = Callable[
    [list[Message], ContextUsage], "list[Message] | Awaitable[list[Message]]"
]
"""Before every model call: the run's messages (the loop's own list; return a new list,
or the same one changed) and its context usage. The system prompt and the latest user
message should stay, and each tool result must keep its assistant call before it."""

OutputKeeper = Callable[[str, str, str], "str | None"]
"""``(call_id, tool_name, output_text)`` -> where the whole output is kept (a path a
person can open), or ``None``; called when an output is pruned."""


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{attribute.name} must be a positive int or None, got {value!r}")


def _share(_instance: object, _attribute: object, value: float) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value <= 1:
        raise ValueError(f"compact_at must be a share of the window in (0, 1], got {value!r}")


def _keep(_instance: object, _attribute: object, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"keep_recent_iterations must be an int >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class ContextPolicy:
    """How a run keeps its requests within the model's context window.

    ``window`` is the model's window in tokens; ``None`` takes the model caller's
    ``context_window`` attribute (the adapters of ``cleveragents.llm`` have one), and
    without either the run has no budget. ``reserve_tokens`` is kept free for the answer
    (``None``: the caller's ``max_output_tokens``, else nothing). ``summary_model``
    writes summaries (default: the run's own model). ``processor`` replaces the default
    prune-then-summarise policy. ``enabled=False`` turns the budget off.
    """

    enabled: bool = True
    window: int | None = attrs.field(default=None, validator=_positive)
    compact_at: float = attrs.field(default=0.8, validator=_share)
    keep_recent_iterations: int = attrs.field(default=2, validator=_keep)
    reserve_tokens: int | None = attrs.field(default=None, validator=_positive)
    summarize: bool = True
    summary_model: LLMCaller | None = attrs.field(default=None, eq=False)
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    processor: HistoryProcessor | None = attrs.field(default=None, eq=False)
    keep_output: OutputKeeper | None = attrs.field(default=None, eq=False)


NO_BUDGET = ContextPolicy(enabled=False)


def estimate_text_tokens(text: str) -> int:
    """Tokens of a text by the documented rate (``BYTES_PER_TOKEN``), rounded up."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


def estimate_message_tokens(message: Message) -> int:
    """One message's estimated tokens: its text, its calls' names and arguments, and its
    reasoning with the provider state sent back with it."""
    total = MESSAGE_OVERHEAD + estimate_text_tokens(message.content)
    for call in message.tool_calls:
        total += estimate_text_tokens(call.name) + estimate_text_tokens(_json(call.arguments))
        if call.state is not None:
            total += estimate_text_tokens(_json(call.state))
    for part in message.reasoning:
        total += estimate_text_tokens(part.text)
        if part.state is not None:
            total += estimate_text_tokens(_json(part.state))
    if message.state is not None:
        total += estimate_text_tokens(_json(message.state))
    return total + MEDIUM_TOKENS * len(message.media)


def estimate_tools_tokens(tools: Sequence[ToolSchema]) -> int:
    return sum(
        estimate_text_tokens(t.name)
        + estimate_text_tokens(t.description)
        + estimate_text_tokens(_json(t.parameters))
        for t in tools
    )


def _json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


@attrs.define(slots=True, eq=False)
class Compaction:
    """What one compaction step did (the loop turns it into events)."""

    strategy: Strategy
    tokens_before: int
    tokens_after: int
    messages_removed: int
    pruned: dict[str, str] = attrs.field(factory=dict)
    """Call id -> the stub its output became."""
    summary: str | None = None
    """The text of the message that stands for the summarised ones."""
    kept_from_iteration: int | None = None
    """The first iteration of this run kept whole after a summary."""


class ContextBudget:
    """One run's budget: the estimate, and the default compaction steps."""

    __slots__ = (
        "_anchor_len",
        "_anchor_tokens",
        "_pending_len",
        "_sizes",
        "_tools",
        "_tools_tokens",
        "limit",
        "policy",
        "pruned",
        "starts",
        "window",
    )

    def __init__(self, policy: ContextPolicy, window: int | None, reserve: int) -> None:
        self.policy = policy
        self.window = window
        self.limit = None if window is None else max(1, int(window * policy.compact_at) - reserve)
        self._sizes: list[int] = []
        self._anchor_tokens: int | None = None
        self._anchor_len = 0
        self._pending_len = 0
        self._tools: object = None
        self._tools_tokens = 0
        self.starts: list[tuple[int, int]] = []
        """(iteration, index of its assistant message) of each iteration of this run."""
        self.pruned: set[str] = set()

    # -- the estimate --------------------------------------------------------------------

    def estimate(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> int:
        """The size of a request of these messages and tools, in tokens."""
        sizes = self._sizes
        if len(sizes) > len(messages):  # rewritten by a processor: count afresh
            sizes.clear()
            self._anchor_tokens = None
        for message in messages[len(sizes) :]:
            sizes.append(estimate_message_tokens(message))
        anchor = self._anchor_tokens
        if anchor is not None:
            return anchor + sum(sizes[self._anchor_len :])
        if tools is not self._tools:
            self._tools = tools
            self._tools_tokens = estimate_tools_tokens(tools)
        return self._tools_tokens + sum(sizes)

    def sent(self, messages: Sequence[Message]) -> None:
        """A request of ``messages`` is about to go."""
        self._pending_len = len(messages)

    def reported(self, input_tokens: int | None) -> None:
        """The provider measured the request just sent."""
        if input_tokens:
            self._anchor_tokens = input_tokens
            self._anchor_len = self._pending_len

    def rewritten(self) -> None:
        """The messages were changed in place by someone else: estimate them afresh."""
        self._sizes.clear()
        self._anchor_tokens = None

    def _rebase(self, messages: Sequence[Message], before: int) -> None:
        """After a compaction of ours: the measured size less what our estimate says was
        removed. The estimate undercounts a message's framing, which a compaction mostly
        keeps (a stub) or removes (a summary): either way the result errs high, never
        low, and the provider's next count sets it right."""
        old = sum(self._sizes)
        self._sizes = [estimate_message_tokens(m) for m in messages]
        self._anchor_tokens = max(0, before - (old - sum(self._sizes)))
        self._anchor_len = len(messages)

    def iteration_started(self, iteration: int, index: int) -> None:
        self.starts.append((iteration, index))

    def over(self, estimate: int) -> bool:
        return self.limit is not None and estimate > self.limit

    def keep_from(self, keep_recent: int) -> tuple[int, int] | None:
        """(iteration, index) of the first iteration kept whole, or ``None`` when there
        are not more iterations than that (nothing older to compact)."""
        if keep_recent <= 0:
            return (0, -1) if self.starts else None
        if len(self.starts) <= keep_recent:
            return None
        return self.starts[-keep_recent]

    # -- prune ---------------------------------------------------------------------------

    def prune(
        self, messages: list[Message], tools: Sequence[ToolSchema], keep_recent: int
    ) -> Compaction | None:
        """Stub the outputs of tool calls before the kept iterations; ``None`` when there
        is nothing to prune."""
        kept = self.keep_from(keep_recent)
        if kept is None:
            return None
        end = len(messages) if kept[1] < 0 else kept[1]
        before = self.estimate(messages, tools)
        pruned: dict[str, str] = {}
        keeper = self.policy.keep_output
        for index in range(end):
            message = messages[index]
            call_id = message.tool_call_id
            if message.role != "tool" or call_id is None or call_id in self.pruned:
                continue
            size = len(message.content.encode("utf-8", "surrogatepass"))
            if size < PRUNE_MIN_BYTES and not message.media:
                continue
            name = message.name or "the tool"
            where = keeper(call_id, name, message.content) if keeper is not None else None
            stub = prune_stub(name, size, where)
            messages[index] = attrs.evolve(message, content=stub, media=[])  # images go too
            self.pruned.add(call_id)
            pruned[call_id] = stub
        if not pruned:
            return None
        self._rebase(messages, before)
        after = self.estimate(messages, tools)
        return Compaction("prune", before, after, 0, pruned)

    # -- summarise -----------------------------------------------------------------------

    def summary_range(
        self, messages: Sequence[Message], prompt: Message, keep_recent: int
    ) -> tuple[list[int], int, int] | None:
        """(indexes to summarise, index where the kept part starts, its iteration), or
        ``None`` when there is nothing to summarise."""
        kept = self.keep_from(keep_recent)
        if kept is None:
            return None
        iteration, start = kept
        if start < 0:
            start, iteration = len(messages), 0
        chosen = [
            i for i in range(start) if messages[i].role != "system" and messages[i] is not prompt
        ]
        if not chosen:
            return None
        return chosen, start, iteration

    def summary_request_text(self, messages: Sequence[Message], chosen: list[int]) -> str:
        """The conversation to summarise as text, bounded to fit the window."""
        budget = (
            None
            if self.window is None
            else int(self.window * SUMMARY_INPUT_SHARE) * BYTES_PER_TOKEN
        )
        parts: list[str] = []
        used = 0
        for index in reversed(chosen):  # the latest matter most: cut from the oldest
            part = render_message(messages[index])
            if budget is not None and used + len(part) > budget:
                parts.append("[older messages left out]")
                break
            parts.append(part)
            used += len(part)
        return "\n\n".join(reversed(parts))

    def apply_summary(
        self,
        messages: list[Message],
        tools: Sequence[ToolSchema],
        prompt: Message,
        chosen: list[int],
        start: int,
        kept_iteration: int,
        summary: str,
    ) -> Compaction:
        """Replace the chosen messages by one summary message after the prompt."""
        before = self.estimate(messages, tools)
        dropped = set(chosen)
        head = [m for i, m in enumerate(messages[:start]) if i not in dropped]
        summary_message = Message("user", summary_text(summary))
        rest = messages[start:]
        at = next((i for i, m in enumerate(head) if m is prompt), len(head) - 1)
        new = [*head[: at + 1], summary_message, *head[at + 1 :], *rest]
        shift = len(new) - len(messages)
        messages[:] = new
        self.starts = [(it, i + shift) for it, i in self.starts if i >= start]
        self._rebase(messages, before)
        after = self.estimate(messages, tools)
        return Compaction(
            "summary", before, after, len(chosen), summary=summary_message.content,
            kept_from_iteration=kept_iteration or None,
        )  # fmt: skip


def prune_stub(tool_name: str, size: int, where: str | None) -> str:
    """The text a pruned output becomes."""
    kept = f"; the whole output is kept in {where}" if where else ""
    return (
        f"[The output of {tool_name} ({size:,} bytes) was cut from the conversation to "
        f"save context{kept}. Call the tool again if you need it.]"
    )


def summary_text(summary: str) -> str:
    """The user message that stands for the summarised messages."""
    return (
        "[Earlier messages of this conversation were compacted. Summary of the "
        f"conversation and the work so far:]\n\n{summary}"
    )


def render_message(message: Message) -> str:
    """One message as the summariser reads it."""
    text = message.content
    if len(text) > SUMMARY_MESSAGE_BYTES:
        text = text[:SUMMARY_MESSAGE_BYTES] + f" [... {len(text) - SUMMARY_MESSAGE_BYTES} more]"
    if message.role == "tool":
        status = "failed" if message.is_error else "returned"
        return f"TOOL {message.name or ''} {status}:\n{text}"
    calls = "".join(
        f"\n-> call {c.name} {_json(c.arguments)[:SUMMARY_MESSAGE_BYTES]}"
        for c in message.tool_calls
    )
    return f"{message.role.upper()}:\n{text}{calls}"
