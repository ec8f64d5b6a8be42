"""The scripted model: a deterministic ``LLMCaller`` that replays a list of turns.

It is the embedded default for tests, demos and client authors: no key, no network.
Each turn is ``{"reasoning"?: str, "content"?: str, "toolCalls"?: [{"name",
"arguments", "id"?}], "usage"?: {"inputTokens", "outputTokens", "cacheReadTokens"?,
"cacheWriteTokens"?, "reasoningTokens"?}}`` (``tool_calls`` is accepted too). A turn's
reasoning streams as reasoning before its content; its usage is reported as given. When
the script runs out, its last turn repeats. A compaction's summary request (purpose
``"summary"``) is answered with a short deterministic summary, not a turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cleveragents.tool import LLMRequest, LLMResponse, Reasoning, ToolCall, Usage

from .errors import ModelConfigError


class ScriptedModel:
    """Replays turns by iteration number: turn ``i`` answers iteration ``i`` (1-based)."""

    blocking = False  # instant: runs inline on the event loop
    context_window: int | None = None
    """Unlimited unless the spec's ``contextWindow`` says (a run's budget reads it)."""
    max_output_tokens: int | None = None
    origin: str | None = None
    """The model its answers are stamped with (``scripted:PATH``, set from the spec): a
    conversation continued on another model then gets their reasoning as text, as from
    any provider. ``None`` (a model built here directly): not stamped."""

    def __init__(self, turns: Sequence[Mapping[str, Any]]) -> None:
        if isinstance(turns, (str, bytes)) or not isinstance(turns, Sequence) or not turns:
            raise ModelConfigError("a scripted model needs a non-empty list of turns")
        self._turns = tuple(_parse_turn(turn, index) for index, turn in enumerate(turns))

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Load a JSON list of turns; errors name the file."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ModelConfigError(f"scripted model file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelConfigError(f"cannot read scripted model file {path}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ModelConfigError(f"scripted model file {path} is not JSON: {exc}") from None
        if not isinstance(data, list):
            raise ModelConfigError(f"scripted model file {path} must hold a JSON list of turns")
        return cls(data)

    def __len__(self) -> int:
        return len(self._turns)

    def __call__(self, request: LLMRequest) -> LLMResponse:
        if request.purpose == "summary":
            return LLMResponse(_summary(request))
        turn = self._turns[min(request.iteration, len(self._turns)) - 1]
        if turn.reasoning:
            request.on_reasoning(turn.reasoning)
        if turn.content:
            request.on_delta(turn.content)
        return LLMResponse(
            turn.content,
            [
                ToolCall(call_id or f"call_{request.iteration}_{index}", name, dict(arguments))
                for index, (call_id, name, arguments) in enumerate(turn.calls)
            ],
            usage=attrs.evolve(turn.usage) if turn.usage is not None else None,
            reasoning=[Reasoning(turn.reasoning)] if turn.reasoning else [],
            origin=self.origin,
        )


def _summary(request: LLMRequest) -> str:
    """A deterministic summary: what the summarised text holds, by kind of message."""
    text = request.messages[-1].content if request.messages else ""
    heads = [line.split(":", 1)[0] for line in text.splitlines() if line.isupper() or ":" in line]
    kinds = {kind: sum(h.startswith(kind) for h in heads) for kind in ("USER", "ASSISTANT", "TOOL")}
    counted = ", ".join(f"{n} {kind.lower()}" for kind, n in kinds.items() if n)
    return f"(scripted summary of {len(text)} characters: {counted or 'no'} messages)"


@attrs.frozen
class _Turn:
    content: str
    calls: tuple[tuple[str | None, str, Mapping[str, Any]], ...]
    reasoning: str = ""
    usage: Usage | None = None


_USAGE_FIELDS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "cacheWriteTokens": "cache_write_tokens",
    "reasoningTokens": "reasoning_tokens",
}
_REQUIRED_USAGE = ("inputTokens", "outputTokens")


def _parse_usage(raw: object, where: str) -> Usage | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ModelConfigError(f"{where}: usage must be an object")
    unknown = sorted(set(raw) - set(_USAGE_FIELDS))
    if unknown:
        raise ModelConfigError(f"{where}: usage has unknown field {unknown[0]!r}")
    counts: dict[str, int] = {}
    for key, name in _USAGE_FIELDS.items():
        value = raw.get(key)
        if value is None:
            if key in _REQUIRED_USAGE:
                raise ModelConfigError(f"{where}: usage needs {key!r}")
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ModelConfigError(f"{where}: usage {key!r} must be a whole number >= 0")
        counts[name] = value
    return Usage(**counts)


def _parse_turn(turn: object, index: int) -> _Turn:
    where = f"scripted turn {index}"
    if not isinstance(turn, Mapping):
        raise ModelConfigError(f"{where} must be an object")
    unknown = set(turn) - {"content", "toolCalls", "tool_calls", "reasoning", "usage"}
    if unknown:
        raise ModelConfigError(f"{where} has unknown field {sorted(unknown)[0]!r}")
    content = turn.get("content") or ""
    if not isinstance(content, str):
        raise ModelConfigError(f"{where}: content must be a string")
    reasoning = turn.get("reasoning") or ""
    if not isinstance(reasoning, str):
        raise ModelConfigError(f"{where}: reasoning must be a string")
    raw_calls = turn.get("toolCalls", turn.get("tool_calls")) or []
    if not isinstance(raw_calls, list):
        raise ModelConfigError(f"{where}: toolCalls must be a list")
    calls = []
    for number, call in enumerate(raw_calls):
        at = f"{where}, toolCalls[{number}]"
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ModelConfigError(f"{at} needs a string 'name'")
        arguments = call.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise ModelConfigError(f"{at}: arguments must be a JSON object")
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise ModelConfigError(f"{at}: id must be a string")
        calls.append((call_id, call["name"], arguments))
    return _Turn(content, tuple(calls), reasoning, _parse_usage(turn.get("usage"), where))
