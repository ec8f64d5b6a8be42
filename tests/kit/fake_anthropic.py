"""A stateful fake of Anthropic's messages API, served on loopback
(``LoopbackServer(respond=FakeAnthropic(...))``): it answers from a script of turns,
signs the thinking it sends, checks it when it comes back, caches prompt prefixes at
the breakpoints it is given, and refuses what the real API refuses, with its 400.

The rules it enforces, and where they are written down:

- Thinking in a tool loop (platform.claude.com, "Thinking" and "Thinking in tool and
  multi-turn workflows"): "when you return a tool result, the thinking blocks from the
  assistant message must come back with it", complete and unmodified; "rebuilding the
  message or filtering out redacted_thinking blocks triggers a 400 error"; "the round-
  trip rules are identical" for adaptive and budgeted thinking. The API's words, as
  users quote them from its 400s:

  * ``messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found
    `tool_use`. When `thinking` is enabled, a final `assistant` message must start with
    a thinking block (preceeding the lastmost set of `tool_use` and `tool_result`
    blocks). ...`` (the assistant turn before the last tool result starts otherwise);
  * ``messages.1.content.0: Invalid `signature` in `thinking` block`` (a block whose
    text or signature changed, or that another model signed);
  * ``messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest
    assistant message cannot be modified. These blocks must remain as they were in the
    original response.`` (blocks dropped or reordered);
  * ``messages.1.content.0: Invalid `data` in `redacted_thinking` block`` (the fake's
    wording for a changed redacted block; the docs name no message for it).

- Thinking settings (platform.claude.com, "Extended thinking", "Adaptive thinking";
  the SDK's ``ThinkingConfigEnabledParam``: "Must be >=1024 and less than
  `max_tokens`"): ``thinking.budget_tokens: Input should be greater than or equal to
  1024``; ``max_tokens` must be greater than `thinking.budget_tokens``` unless the
  interleaved-thinking beta lets a Claude 4 model's budget pass it; Claude 4.7 and
  later answer ``"thinking.type.enabled" is not supported for this model. Use
  "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.``
  and models before 4.6 ``adaptive thinking is not supported on this model``; with
  thinking on, ``temperature` may only be set to 1 when thinking is enabled or in
  adaptive mode``.

- Prompt caching (platform.claude.com, "Prompt caching"): the prefix is the tools, then
  the system prompt, then the messages, in that order; a ``cache_control`` breakpoint
  caches the prefix up to and including its block, once the prefix reaches the model's
  minimum (1,024 tokens for most models, 4,096 for Claude Opus 4.5-4.7 and Haiku 4.5,
  2,048 for the Claude 3 Haikus; shorter prefixes are silently not cached); a request
  reads the longest cached prefix that ends at one of its breakpoints or at most 20
  blocks before one; at most 4 breakpoints (``A maximum of 4 blocks with cache_control
  may be provided. Found 5.``); a change of the thinking settings invalidates the
  cached messages but not the tools and system prompt; entries live 5 minutes from
  their last use. ``cache_control`` itself is not part of the prefix.

- Usage: ``cache_read_input_tokens`` were read from the cache,
  ``cache_creation_input_tokens`` written to it, and ``input_tokens`` are the rest (the
  part after the last breakpoint, or all of it). The fake counts tokens as one per 4
  characters of a block's canonical JSON (``ceil(len / 4)``): not the real tokenizer,
  but honest about what is sent, and the same count for the same bytes.

A turn is picked by how many assistant messages the request carries (the first answer
of a conversation is ``turns[0]``); past the script the fake answers ``final``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from kit.fake_media import anthropic_problem
from kit.loopback import Recorded, Reply, event, json_reply, sse_reply

INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
CACHE_TTL_S = 300.0
CHARS_PER_TOKEN = 4

# The models by what thinking they take, as the docs list them (by id prefix).
BUDGET_ONLY = (
    "claude-3-7-sonnet", "claude-sonnet-4-0", "claude-sonnet-4-2025", "claude-opus-4-0",
    "claude-opus-4-2025", "claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5",
    "claude-opus-4-5",
)  # fmt: skip
ADAPTIVE_ONLY = (
    "claude-opus-4-7", "claude-opus-4-8", "claude-mythos", "claude-opus-5", "claude-sonnet-5",
    "claude-haiku-5", "claude-fable-5",
)  # fmt: skip
NO_INTERLEAVING = ("claude-3-7-sonnet",)
OMITTED_BY_DEFAULT = ("claude-opus-4-7", "claude-mythos-preview")
MIN_CACHEABLE = (
    (("claude-opus-4-5", "claude-opus-4-6", "claude-opus-4-7", "claude-haiku-4-5"), 4096),
    (("claude-3-haiku", "claude-3-5-haiku"), 2048),
)
DEFAULT_MIN_CACHEABLE = 1024
EFFORTS = ("low", "medium", "high", "xhigh", "max")

MUST_START_WITH_THINKING = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
    "We recommend you include thinking blocks from previous turns. To avoid this "
    "requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
INVALID_SIGNATURE = "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
INVALID_REDACTED = "messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block"
CANNOT_BE_MODIFIED = (
    "messages.{i}.content.{j}: `thinking` or `redacted_thinking` blocks in the latest "
    "assistant message cannot be modified. These blocks must remain as they were in the "
    "original response."
)
ENABLED_NOT_SUPPORTED = (
    '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" '
    'and "output_config.effort" to control thinking behavior.'
)
ADAPTIVE_NOT_SUPPORTED = "adaptive thinking is not supported on this model"
BUDGET_TOO_SMALL = "thinking.budget_tokens: Input should be greater than or equal to 1024"
BUDGET_NOT_BELOW_MAX = (
    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
    "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    "#max-tokens-and-context-window-size"
)
TEMPERATURE_WITH_THINKING = (
    "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. "
    "Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
)
TOO_MANY_BREAKPOINTS = "A maximum of 4 blocks with cache_control may be provided. Found {n}."


@attrs.frozen
class Turn:
    """One scripted answer: thinking blocks (each string one block; sent only when the
    request turns thinking on), a redacted block after them, text, then tool calls by
    their wire names (``t__echo`` for ``t/echo``)."""

    thinking: tuple[str, ...] = ()
    redacted: bool = False
    text: str = ""
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


@attrs.frozen
class Served:
    """What the fake answered one request with."""

    usage: dict[str, Any]
    thinking: Mapping[str, Any] | None
    beta: str
    breakpoints: int


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _starts(model: str, prefixes: Sequence[str]) -> bool:
    return any(model.startswith(prefix) for prefix in prefixes)


def _canonical(block: Any) -> str:
    """A block as the cache sees it: its content, without its breakpoint."""
    if isinstance(block, Mapping):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _has_breakpoint(block: Any) -> bool:
    return isinstance(block, Mapping) and "cache_control" in block


def _content(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


class FakeAnthropic:
    """The messages API as a function of each request (see the module docstring).

    ``served`` holds what each answered request reported, ``refusals`` the message of
    each 400; ``min_cacheable`` overrides the model's minimum cacheable prefix;
    ``clock`` gives the time for cache lifetimes."""

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        final: Turn = Turn(text="Done."),
        min_cacheable: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.turns = list(turns)
        self.final = final
        self.min_cacheable = min_cacheable
        self.clock = clock
        self.served: list[Served] = []
        self.refusals: list[str] = []
        self._secret = b"fake-anthropic-signing-key"
        self._ids = itertools.count(1)
        self._issued: dict[str, tuple[str, ...]] = {}
        """tool_use id -> the thinking (signatures and data) the answer with it led with."""
        self._cache: dict[str, float] = {}
        """prefix hash -> when the entry expires."""

    # -- the HTTP face --------------------------------------------------------------------

    def __call__(self, recorded: Recorded) -> Reply:
        body = recorded.body if isinstance(recorded.body, Mapping) else {}
        if not recorded.path.endswith("/v1/messages") or body.get("stream") is not True:
            return self._refuse("the fake serves streamed POST /v1/messages only")
        refusal = self._check(body, recorded.headers)
        if refusal is not None:
            return self._refuse(refusal)
        turn = self._turn(body)
        declared = {t.get("name") for t in body.get("tools") or ()}
        unknown = [name for name, _ in turn.calls if name not in declared]
        if unknown:
            return self._refuse(f"fake script: tool {unknown[0]!r} is not in the request")
        usage = self._cache_usage(body)
        thinking = body.get("thinking") if _thinking_on(body) else None
        self.served.append(
            Served(usage, thinking, recorded.headers.get("anthropic-beta", ""), _breakpoints(body))
        )
        return self._stream(turn, body, usage)

    def _refuse(self, message: str) -> Reply:
        self.refusals.append(message)
        error = {"type": "invalid_request_error", "message": message}
        return json_reply({"type": "error", "error": error}, 400)

    def _turn(self, body: Mapping[str, Any]) -> Turn:
        answered = sum(1 for m in body.get("messages") or () if m.get("role") == "assistant")
        return self.turns[answered] if answered < len(self.turns) else self.final

    # -- the rules ------------------------------------------------------------------------

    def _check(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
        if "max_tokens" not in body:
            return "max_tokens: Field required"
        media = anthropic_problem(body.get("messages") or [])
        if media is not None:
            return media
        refusal = self._check_settings(body, headers)
        if refusal is not None:
            return refusal
        found = _breakpoints(body)
        if found > MAX_BREAKPOINTS:
            return TOO_MANY_BREAKPOINTS.format(n=found)
        if _thinking_on(body):
            return self._check_thinking(body.get("messages") or [], str(body.get("model")))
        return None

    def _check_settings(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
        model = str(body.get("model") or "")
        thinking = body.get("thinking")
        kind = thinking.get("type") if isinstance(thinking, Mapping) else None
        if thinking is not None and kind not in ("enabled", "adaptive", "disabled"):
            return "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'"
        if kind == "enabled":
            assert isinstance(thinking, Mapping)
            if _starts(model, ADAPTIVE_ONLY):
                return ENABLED_NOT_SUPPORTED
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                return BUDGET_TOO_SMALL
            betas = [b.strip() for b in headers.get("anthropic-beta", "").split(",")]
            interleaved = INTERLEAVED_BETA in betas and not _starts(model, NO_INTERLEAVING)
            if budget >= body["max_tokens"] and not interleaved:
                return BUDGET_NOT_BELOW_MAX
        if kind == "adaptive" and _starts(model, BUDGET_ONLY):
            return ADAPTIVE_NOT_SUPPORTED
        effort = (body.get("output_config") or {}).get("effort")
        if effort is not None and effort not in EFFORTS:
            return "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
        if _thinking_on(body) and body.get("temperature", 1) != 1:
            return TEMPERATURE_WITH_THINKING
        return None

    def _check_thinking(self, messages: Sequence[Mapping[str, Any]], model: str) -> str | None:
        for i, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            for j, block in enumerate(_content(message)):
                if block.get("type") == "thinking" and not hmac.compare_digest(
                    str(block.get("signature") or ""), self._sign(model, block.get("thinking"))
                ):
                    return INVALID_SIGNATURE.format(i=i, j=j)
                if block.get("type") == "redacted_thinking" and not self._genuine(
                    block.get("data")
                ):
                    return INVALID_REDACTED.format(i=i, j=j)
        if len(messages) < 2 or not any(
            b.get("type") == "tool_result" for b in _content(messages[-1])
        ):
            return None  # not inside a tool loop: earlier thinking may be left out
        i = len(messages) - 2
        blocks = _content(messages[i])
        first = blocks[0].get("type") if blocks else "nothing"
        if first not in ("thinking", "redacted_thinking"):
            return MUST_START_WITH_THINKING.format(i=i, found=first)
        sent = tuple(_mark(b) for b in itertools.takewhile(_is_thinking, blocks))
        ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        issued = next((self._issued[x] for x in ids if x in self._issued), None)
        if issued is not None and sent != issued:
            pairs = enumerate(zip(sent, issued, strict=False))
            j = next((k for k, (a, b) in pairs if a != b), len(sent))
            return CANNOT_BE_MODIFIED.format(i=i, j=min(j, len(blocks) - 1))
        return None

    def _sign(self, model: str, text: Any) -> str:
        mac = hmac.new(self._secret, f"{model}\n{text}".encode(), hashlib.sha256).digest()
        return base64.b64encode(mac).decode()

    def _redacted(self) -> str:
        payload = f"redacted-{next(self._ids)}".encode()
        mac = hmac.new(self._secret, payload, hashlib.sha256).digest()
        return base64.b64encode(payload + mac).decode()

    def _genuine(self, data: Any) -> bool:
        try:
            raw = base64.b64decode(str(data), validate=True)
        except ValueError:
            return False
        payload, mac = raw[:-32], raw[-32:]
        expected = hmac.new(self._secret, payload, hashlib.sha256).digest()
        return len(raw) > 32 and hmac.compare_digest(mac, expected)

    # -- prompt caching -------------------------------------------------------------------

    def _cache_usage(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Read the longest cached prefix the breakpoints reach, write the prefixes they
        end, and report the three input counts."""
        model = str(body.get("model") or "")
        settings = _canonical({k: body.get(k) for k in ("thinking", "output_config") if k in body})
        running = hashlib.sha256(model.encode())
        hashes: list[str] = []
        totals: list[int] = []
        marks: list[int] = []
        total = 0
        for position, (segment, block) in enumerate(_prefix_blocks(body)):
            text = _canonical(block)
            # The thinking settings are part of every message block's key: changing them
            # invalidates cached messages, never the tools and system prompt.
            running.update(f"{segment}\0{settings if segment == 'messages' else ''}\0".encode())
            running.update(text.encode())
            hashes.append(running.hexdigest())
            total += tokens(text)
            totals.append(total)
            if _has_breakpoint(block):
                marks.append(position)
        now = self.clock()
        self._cache = {h: until for h, until in self._cache.items() if until > now}
        read_at = -1
        for mark in marks:
            for position in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                if hashes[position] in self._cache:
                    read_at = max(read_at, position)
                    break
        read = totals[read_at] if read_at >= 0 else 0
        if read_at >= 0:
            self._cache[hashes[read_at]] = now + CACHE_TTL_S
        minimum = self._minimum(model)
        written = 0
        for mark in marks:
            if totals[mark] >= minimum:
                self._cache[hashes[mark]] = now + CACHE_TTL_S
                written = max(written, totals[mark])
        creation = max(0, written - read)
        return {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
        }

    def _minimum(self, model: str) -> int:
        if self.min_cacheable is not None:
            return self.min_cacheable
        for prefixes, minimum in MIN_CACHEABLE:
            if _starts(model, prefixes):
                return minimum
        return DEFAULT_MIN_CACHEABLE

    # -- the answer -----------------------------------------------------------------------

    def _stream(self, turn: Turn, body: Mapping[str, Any], usage: dict[str, Any]) -> Reply:
        model = str(body.get("model") or "")
        events: list[str] = []
        index = 0
        said: list[str] = []
        thought = 0
        issued: list[str] = []
        if _thinking_on(body):
            thinking = body.get("thinking") or {}
            default = "omitted" if _starts(model, OMITTED_BY_DEFAULT) else "summarized"
            omitted = (thinking.get("display") or default) == "omitted"
            for text in turn.thinking:
                shown = "" if omitted else text
                signature = self._sign(model, shown)
                deltas = [{"type": "thinking_delta", "thinking": p} for p in _halves(shown)]
                deltas.append({"type": "signature_delta", "signature": signature})
                events += _block(
                    index, {"type": "thinking", "thinking": "", "signature": ""}, deltas
                )
                issued.append(signature)
                thought += tokens(text)
                index += 1
            if turn.redacted:
                data = self._redacted()
                events += _block(index, {"type": "redacted_thinking", "data": data}, [])
                issued.append(data)
                thought += tokens(data)
                index += 1
        if turn.text:
            deltas = [{"type": "text_delta", "text": p} for p in _halves(turn.text)]
            events += _block(index, {"type": "text", "text": ""}, deltas)
            said.append(turn.text)
            index += 1
        for name, arguments in turn.calls:
            call_id = f"toolu_{next(self._ids):04d}"
            self._issued[call_id] = tuple(issued)
            text = json.dumps(arguments)
            start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _halves(text)]
            events += _block(index, start, deltas)
            said.append(text)
            index += 1
        output = thought + sum(tokens(s) for s in said) + 1
        final_usage: dict[str, Any] = {**usage, "output_tokens": output}
        if thought:
            final_usage["output_tokens_details"] = {"thinking_tokens": thought}
        start_message = {
            "id": f"msg_{next(self._ids):04d}", "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }  # fmt: skip
        stop = "tool_use" if turn.calls else "end_turn"
        return sse_reply(
            event({"type": "message_start", "message": start_message}),
            *events,
            event({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": final_usage}),
            event({"type": "message_stop"}),
        )


def _thinking_on(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


def _is_thinking(block: Mapping[str, Any]) -> bool:
    return block.get("type") in ("thinking", "redacted_thinking")


def _mark(block: Mapping[str, Any]) -> str:
    """What identifies a thinking block the fake issued: its signature, or its data."""
    return str(block.get("signature") if block.get("type") == "thinking" else block.get("data"))


def _breakpoints(body: Mapping[str, Any]) -> int:
    return sum(1 for _, block in _prefix_blocks(body) if _has_breakpoint(block))


def _prefix_blocks(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The prompt in cache order: each tool, each system block, each message block."""
    blocks: list[tuple[str, Any]] = [("tools", tool) for tool in body.get("tools") or ()]
    system = body.get("system")
    if isinstance(system, str) and system:
        blocks.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks += [("system", block) for block in system]
    for message in body.get("messages") or ():
        role = message.get("role")
        blocks += [("messages", {"role": role, **b}) for b in _content(message)]
    return blocks


def _halves(text: str) -> list[str]:
    """Text in two deltas, as a stream splits it (one when it is too short to split)."""
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


def _block(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> list[str]:
    return [
        event({"type": "content_block_start", "index": index, "content_block": start}),
        *(event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas),
        event({"type": "content_block_stop", "index": index}),
    ]
