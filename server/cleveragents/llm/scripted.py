"""The scripted model: a deterministic ``LLMCaller`` that replays a list of turns.

It is the embedded default for tests, demos and client authors: no key, no network.
Each turn is ``{"content"?: str, "toolCalls"?: [{"name", "arguments", "id"?}]}``
(``tool_calls`` is accepted too). When the script runs out, its last turn repeats.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cleveragents.tool import LLMRequest, LLMResponse, ToolCall

from .errors import ModelConfigError


class ScriptedModel:
    """Replays turns by iteration number: turn ``i`` answers iteration ``i`` (1-based)."""

    blocking = False  # instant: runs inline on the event loop

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
        content, calls = self._turns[min(request.iteration, len(self._turns)) - 1]
        if content:
            request.on_delta(content)
        return LLMResponse(
            content,
            [
                ToolCall(call_id or f"call_{request.iteration}_{index}", name, dict(arguments))
                for index, (call_id, name, arguments) in enumerate(calls)
            ],
        )


_Turn = tuple[str, tuple[tuple[str | None, str, Mapping[str, Any]], ...]]


def _parse_turn(turn: object, index: int) -> _Turn:
    where = f"scripted turn {index}"
    if not isinstance(turn, Mapping):
        raise ModelConfigError(f"{where} must be an object")
    unknown = set(turn) - {"content", "toolCalls", "tool_calls"}
    if unknown:
        raise ModelConfigError(f"{where} has unknown field {sorted(unknown)[0]!r}")
    content = turn.get("content") or ""
    if not isinstance(content, str):
        raise ModelConfigError(f"{where}: content must be a string")
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
    return content, tuple(calls)
