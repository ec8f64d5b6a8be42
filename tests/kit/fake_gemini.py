"""A stateful fake of Gemini 3's ``streamGenerateContent`` that enforces thought
signatures and thinking settings as Google documents them, for ``LoopbackServer(respond=
FakeGemini(...))``.

It plays a script of model responses (:class:`Step`), one per accepted request, and
before answering checks the request the way the real API does:

- **Signatures it issues** (ai.google.dev/gemini-api/docs/thought-signatures, "Gemini 3
  returns thought signatures for all model responses ... with a function call"): "When
  there are parallel function calls, the first function call part returned by the model
  response will have a thought signature"; "When there are sequential function calls
  (multi-step), each function call will have a signature"; "Model responses without a
  function call will return a thought signature inside the last part returned by the
  model", and when streaming "the model may return the thought signature in a part with
  an empty text content part". Each signature is opaque bytes in base64 (standard
  alphabet, as the API writes ``bytes``).
- **Signatures it requires back**: "Strict validation is enforced for all function calls
  within the current turn": the turn starts at "the most recent User message that
  contains standard content (e.g., text)" (never a ``functionResponse``), and "The first
  functionCall part in each step of the current turn must include its
  thought_signature", else HTTP 400. The message is the API's own, as users report it
  verbatim (e.g. github.com/niki914/zafiro/issues/100): ``Function call is missing a
  thought_signature in functionCall parts. ... Additional data, function call
  `default_api:NAME` , position N. ...`` with ``"status": "INVALID_ARGUMENT"``
  (``position`` is the content's place in ``contents``, counted from 1, as in the reports
  of a first call at ``position 2``). Signatures on other parts are "recommended", never
  required.
- **Signature values**: one the fake never issued, or a call's signature moved to
  another call ("you must return this signature in the exact part where it was
  received"), is answered ``400 Corrupted thought signature.`` (the API's message, e.g.
  google-gemini/gemini-cli#13467). A text part's signature need only be one it issued:
  the docs promise no error about where those go. Values are
  compared as bytes: protobuf's JSON form of ``bytes`` accepts "either standard or
  URL-safe base64 encoding with/without paddings", and the ``google-genai`` SDK re-writes
  them URL-safe.
- **Thinking settings** (ai.google.dev/gemini-api/docs/thinking): ``thinking_level`` and
  ``thinking_budget`` together are refused (``You can only set only one of thinking
  budget and thinking level.``), and a level the model does not offer too (``Thinking
  level MEDIUM is not supported for this model. Please retry with other thinking
  level.``). With ``include_thoughts`` the step's thought summary streams first as
  ``thought: true`` parts.
- **Usage, honestly counted**: tokens are a quarter of the JSON characters (rounded
  up). ``promptTokenCount`` is the whole request, ``cachedContentTokenCount`` the part of
  it (whole leading ``contents``, with the system text and tools) the previous accepted
  request also began with, as Gemini's implicit caching reports it (left out when 0;
  Gemini caches only prefixes past a model's minimum size, at its discretion, but the
  fake's conversations are tiny, so it has no minimum);
  ``thoughtsTokenCount`` the thinking spent (the budget, else by level: Gemini 3 always
  thinks), ``candidatesTokenCount`` the answer.

Both spellings of a field are read (``thoughtSignature``/``thought_signature``,
``thinkingConfig``/``thinking_config``), as the API's JSON parser does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kit.fake_media import gemini_problem
from kit.loopback import Recorded, Reply, data, json_reply, sse_reply

MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required "
    "for tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
CORRUPTED_SIGNATURE = "Corrupted thought signature."
LEVEL_AND_BUDGET = "You can only set only one of thinking budget and thinking level."
UNSUPPORTED_LEVEL = (
    "Thinking level {level} is not supported for this model. Please retry with other "
    "thinking level."
)
THOUGHTS_BY_LEVEL = {"MINIMAL": 8, "LOW": 32, "MEDIUM": 64, "HIGH": 128}
"""Thinking tokens the fake spends per response at each level (``HIGH`` is Gemini 3's
default)."""


@attrs.frozen
class Step:
    """One model response: function calls (several are parallel), else a final text; the
    thought summary streams first when the request asks for thoughts."""

    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    text: str = ""
    thought: str = "Let me think about what to do next."


def tokens(value: Any) -> int:
    return math.ceil(len(json.dumps(value, sort_keys=True)) / 4)


def error_body(message: str) -> dict[str, Any]:
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


def _field(mapping: Mapping[str, Any], camel: str, snake: str) -> Any:
    return mapping.get(camel, mapping.get(snake))


def _signature(part: Mapping[str, Any]) -> Any:
    return _field(part, "thoughtSignature", "thought_signature")


def _bound_to(part: Mapping[str, Any]) -> str | None:
    """The call (name and arguments) a signature on ``part`` belongs to; ``None`` for a
    text or thought part, whose signatures may travel."""
    call = _field(part, "functionCall", "function_call")
    if isinstance(call, Mapping):
        return json.dumps([call.get("name"), call.get("args") or {}], sort_keys=True)
    return None


def _decode(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    padded = value + "=" * (-len(value) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None


class FakeGemini:
    """Answers each request with the next :class:`Step`, or with the API's 400.

    ``levels`` are the thinking levels the model offers (Gemini 3 Flash: all four; a
    Pro: ``LOW`` and ``HIGH``). ``rejected`` lists the 400 messages given, ``reported``
    the ``usageMetadata`` of each accepted request, ``issued`` every signature given, in
    order (as sent: standard base64).
    """

    def __init__(
        self,
        steps: Sequence[Step],
        *,
        levels: Sequence[str] = ("MINIMAL", "LOW", "MEDIUM", "HIGH"),
        secret: bytes = b"fake-gemini",
    ) -> None:
        self.steps = list(steps)
        self.levels = tuple(levels)
        self.rejected: list[str] = []
        self.reported: list[dict[str, int]] = []
        self.issued: list[str] = []
        self._signs: dict[bytes, str | None] = {}
        self._secret = secret
        self._served = 0
        self._previous: list[Any] | None = None

    def __call__(self, request: Recorded) -> Reply:
        body = request.body if isinstance(request.body, Mapping) else {}
        if not request.path.endswith(":streamGenerateContent?alt=sse"):
            return json_reply({"error": {"code": 404, "message": "Not found."}}, 404)
        problem = (
            self._thinking_problem(body)
            or self._signature_problem(body)
            or gemini_problem(body.get("contents") or [])
        )
        if problem is not None:
            self.rejected.append(problem)
            return json_reply(error_body(problem), 400)
        if self._served >= len(self.steps):
            return json_reply(error_body("the fake's script has no more steps"), 599)
        step = self.steps[self._served]
        self._served += 1
        return self._reply(step, body)

    # -- checks ----------------------------------------------------------------------------

    def _thinking_problem(self, body: Mapping[str, Any]) -> str | None:
        config = self._thinking(body)
        level = _field(config, "thinkingLevel", "thinking_level")
        budget = _field(config, "thinkingBudget", "thinking_budget")
        if level is not None and budget is not None:
            return LEVEL_AND_BUDGET
        if level is not None and str(level).upper() not in self.levels:
            return UNSUPPORTED_LEVEL.format(level=str(level).upper())
        return None

    def _signature_problem(self, body: Mapping[str, Any]) -> str | None:
        contents = body.get("contents") or []
        start = 0
        for index, content in enumerate(contents):
            parts = content.get("parts") or []
            if content.get("role") == "user" and any("text" in p for p in parts):
                start = index  # the last such message opens the current turn
        for index, content in enumerate(contents):
            if content.get("role") != "model":
                continue
            parts = content.get("parts") or []
            for part in parts:
                signature = _signature(part)
                if signature is None:
                    continue
                raw = _decode(signature)
                if raw not in self._signs or self._signs[raw] not in (None, _bound_to(part)):
                    return CORRUPTED_SIGNATURE
            calls = [p for p in parts if _field(p, "functionCall", "function_call")]
            if index > start and calls and _signature(calls[0]) is None:
                name = _field(calls[0], "functionCall", "function_call").get("name")
                return MISSING_SIGNATURE.format(name=name, position=index + 1)
        return None

    # -- the answer ------------------------------------------------------------------------

    def _thinking(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        generation = _field(body, "generationConfig", "generation_config") or {}
        config = _field(generation, "thinkingConfig", "thinking_config")
        return config if isinstance(config, Mapping) else {}

    def _sign(self, part: dict[str, Any]) -> dict[str, Any]:
        """``part`` with a fresh signature bound to it."""
        bound = _bound_to(part)
        raw = hashlib.sha256(self._secret + f"{len(self._signs)}:{bound}".encode()).digest()
        self._signs[raw] = bound
        signature = base64.b64encode(raw).decode("ascii")
        self.issued.append(signature)
        return {**part, "thoughtSignature": signature}

    def _reply(self, step: Step, body: Mapping[str, Any]) -> Reply:
        config = self._thinking(body)
        parts: list[dict[str, Any]] = []
        if _field(config, "includeThoughts", "include_thoughts") and step.thought:
            half = len(step.thought) // 2
            parts += [
                {"text": step.thought[:half], "thought": True},
                {"text": step.thought[half:], "thought": True},
            ]
        if step.text:
            half = len(step.text) // 2
            parts += [{"text": step.text[:half]}, {"text": step.text[half:]}]
        calls = [{"functionCall": {"name": name, "args": args}} for name, args in step.calls]
        if calls:
            parts += [self._sign(calls[0]), *calls[1:]]
        else:
            parts.append(self._sign({"text": ""}))
        usage = self._usage(step, body, config)
        chunks = [
            data({"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]})
            for part in parts[:-1]
        ]
        last = {"content": {"role": "model", "parts": [parts[-1]]}, "index": 0}
        chunks.append(
            data(
                {
                    "candidates": [{**last, "finishReason": "STOP"}],
                    "usageMetadata": usage,
                    "modelVersion": "gemini-test",
                }
            )
        )
        return sse_reply(*chunks)

    def _usage(
        self, step: Step, body: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, int]:
        contents = list(body.get("contents") or [])
        fixed = [
            _field(body, "systemInstruction", "system_instruction"),
            body.get("tools"),
        ]
        prompt = tokens([fixed, contents])
        cached = 0
        previous = self._previous
        if previous is not None and previous[0] == fixed:
            shared = 0
            while (
                shared < min(len(contents), len(previous[1]))
                and contents[shared] == previous[1][shared]
            ):
                shared += 1
            cached = tokens([fixed, contents[:shared]]) if shared else 0
        self._previous = [fixed, contents]
        budget = _field(config, "thinkingBudget", "thinking_budget")
        level = str(_field(config, "thinkingLevel", "thinking_level") or "HIGH").upper()
        thoughts = budget if isinstance(budget, int) else THOUGHTS_BY_LEVEL.get(level, 0)
        answer = tokens([step.text, [list(call) for call in step.calls]])
        usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": answer,
            "thoughtsTokenCount": thoughts,
            "totalTokenCount": prompt + answer + thoughts,
        }
        if cached:
            usage["cachedContentTokenCount"] = cached
        self.reported.append(usage)
        return usage
