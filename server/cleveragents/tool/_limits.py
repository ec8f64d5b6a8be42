"""Limits a user sets on a run beyond its iterations: tool calls, a wall-clock deadline,
and tokens.

A run that reaches one ends as it does at its iteration limit: ``terminated_by_limit``,
the content so far, and ``limit_reason`` saying which. ``max_iterations`` keeps its own
meaning (at most that many LLM calls); these come on top.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ._types import Usage

__all__ = ["LimitReason", "UsageLimits"]

LimitReason = Literal["iterations", "toolCalls", "deadline", "tokens"]
"""Which limit ended a run."""

DEADLINE_REASON = "deadline"
"""The cancel reason of a run's own token when its deadline passes."""


def _count(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{attribute.name} must be a positive int or None, got {value!r}")


def _seconds(_instance: object, _attribute: object, value: Any) -> None:
    if value is not None and (
        not isinstance(value, int | float) or isinstance(value, bool) or not value > 0
    ):
        raise ValueError(f"deadline_s must be a positive number of seconds, got {value!r}")


@attrs.frozen(kw_only=True)
class UsageLimits:
    """What a run may spend (``None``: no limit).

    - ``max_tool_calls``: tool calls over the whole run. An iteration that asks for more
      calls than remain runs the first ones; the others are recorded as not run.
    - ``deadline_s``: seconds from the run's start; the call in flight (the model's or
      the tools') is cancelled when it passes.
    - ``max_input_tokens``, ``max_output_tokens``, ``max_total_tokens``: summed over the
      run's model calls as the provider reports them; checked after each iteration, so
      the run ends once one is reached (a model that reports no usage is never stopped
      by them).
    """

    max_tool_calls: int | None = attrs.field(default=None, validator=_count)
    deadline_s: float | None = attrs.field(default=None, validator=_seconds)
    max_input_tokens: int | None = attrs.field(default=None, validator=_count)
    max_output_tokens: int | None = attrs.field(default=None, validator=_count)
    max_total_tokens: int | None = attrs.field(default=None, validator=_count)

    def tokens_reached(self, usage: Usage | None) -> bool:
        """Whether the run's usage so far reached a token limit."""
        if usage is None:
            return False
        total = usage.input_tokens + usage.output_tokens
        return (
            (self.max_input_tokens is not None and usage.input_tokens >= self.max_input_tokens)
            or (
                self.max_output_tokens is not None and usage.output_tokens >= self.max_output_tokens
            )
            or (self.max_total_tokens is not None and total >= self.max_total_tokens)
        )
