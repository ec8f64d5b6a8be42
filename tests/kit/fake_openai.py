"""Stateful fakes of OpenAI's Responses API and of a DeepSeek-style chat-completions
server in thinking mode, served on loopback (``LoopbackServer(respond=FakeResponses())``,
``LoopbackServer(respond=FakeThinkingChat())``). Each answers a tool loop from its own
plan, streams its reasoning, checks what comes back, and refuses what the real API
refuses, with its error body.

The Responses API with ``store: false`` (platform.openai.com, "Reasoning": "when using
the Responses API in a stateless mode (either with store set to false, or when an
organization is enrolled in zero data retention), you must still retain reasoning items
across conversation turns ... each of your API requests must have
reasoning.encrypted_content in the include parameter"; the function-calling guide: pass
back "any reasoning items returned with the last function call"). The API's words, as
users quote them from its errors (param ``input``, code ``null`` unless said):

- 404 ``Item with id 'rs_...' not found. Items are not persisted when `store` is set to
  false. Try again with `store` set to true, or remove this item from your input.`` (a
  reasoning item without its encrypted content: openai/openai-agents-python#919,
  vercel/ai#7543);
- 400 ``The encrypted content for item rs_... could not be verified. Reason: Encrypted
  content could not be decrypted or parsed.``, code ``invalid_encrypted_content``, param
  ``null`` (content it did not issue for that item: openai/codex#8145,
  smallmain/vscode-unify-chat-provider#178);
- 400 ``Item 'fc_...' of type 'function_call' was provided without its required
  'reasoning' item: 'rs_...'.`` (a call sent with its item id, without the reasoning
  item that preceded it: mastra-ai/mastra#8738, cline/cline#12242,
  continuedev/continue#10018);
- 400 ``Item 'rs_...' of type 'reasoning' was provided without its required following
  item.`` (a reasoning item not followed by the item, by id, that followed it:
  continuedev/continue#8933, vercel/ai#7099);
- 400 ``No tool call found for function call output with call_id call_....`` and
  ``No tool output found for function call call_....`` (vercel/ai#8216,
  anomalyco/opencode#16717);
- 400 ``Encrypted content is not supported with this model.`` (the include, to a model
  that does not reason: OpenHands/software-agent-sdk#1208), and ``Unsupported value:
  'reasoning.effort' does not support 'minimal' with this model. Supported values are:
  ...``, code ``unsupported_value`` (the form of Kilo-Org/cloud#3807's).

A reasoning model reasons whether or not the request says ``reasoning``; its reasoning
items carry ``encrypted_content`` only when the include asks for it, and a summary only
when ``reasoning.summary`` does. The fake keeps nothing between requests but what it
issued (ids, encrypted content), as ``store: false`` means; a request without
``store: false`` is refused, by the fake's own rule.

DeepSeek's thinking mode (api-docs.deepseek.com, "Thinking Mode": "Between two user
messages, if the model performed a tool call, the intermediate assistant's
reasoning_content must participate in the context concatenation and must be passed back
to the API in all subsequent user interaction turns"; "If your code does not correctly
pass back reasoning_content, the API will return a 400 error"): 400 ``The
`reasoning_content` in the thinking mode must be passed back to the API.``, type and code
``invalid_request_error``, param ``null`` (as DeepSeek V4 words it:
JohnnyZ93/oai-compatible-copilot#215; V3.2 said ``Missing `reasoning_content` field in
the assistant message at message index 2. ...``, continuedev/continue#9606). A server
that streams ``reasoning`` instead (vLLM since 0.16 reads only that field back,
anomalyco/opencode#30477) refuses nothing: ``enforce=False``.

Usage is honest: tokens are one per 4 characters of an item's canonical JSON (not the
real tokenizer, but the same count for the same bytes); a request reads from the cache
the longest run of leading items (tools first) that an earlier request sent, counted
as OpenAI does, from 1,024 tokens on in steps of 128 (DeepSeek: steps of 64, no
minimum); reasoning tokens are 4 times the summary's.

A turn is the number of the model's earlier turns in the request (read from the call
ids it issued, ``call_{turn}_{k}``), so the plan replays the same whatever was dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cleveragents.tool import (
    EventSink,
    IterationFinished,
    LLMCaller,
    Message,
    MessageDelta,
    ReasoningDelta,
    RunEvent,
    ToolCallingRuntime,
    ToolCallRunResult,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
    Usage,
)
from kit.fake_media import chat_problem, responses_problem
from kit.loopback import WAIT_S, Recorded, Reply, data, event, json_reply, sse_reply

CHARS_PER_TOKEN = 4
ENCRYPTED = "reasoning.encrypted_content"
_SECRET = b"fake-openai-reasoning-key"


def tokens(obj: Any) -> int:
    """The fake's token count of a JSON value."""
    return math.ceil(len(canonical(obj)) / CHARS_PER_TOKEN)


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def openai_error(status: int, message: str, *, param: str | None = "input",
                 code: str | None = None) -> Reply:  # fmt: skip
    body = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return json_reply({"error": body}, status)


@attrs.define
class PrefixCache:
    """Which leading runs of items earlier requests sent: a request reads the longest
    it shares, in ``step``-token units once it reaches ``minimum`` tokens."""

    minimum: int
    step: int
    seen: set[str] = attrs.field(factory=set)

    def read(self, items: Sequence[Any]) -> int:
        digest = hashlib.sha256()
        shared = total = 0
        keys = []
        for item in items:  # each key names the whole run of items up to this one
            digest.update(canonical(item).encode())
            total += tokens(item)
            keys.append(digest.hexdigest())
            if keys[-1] in self.seen:
                shared = total
        self.seen.update(keys)
        if shared < self.minimum:
            return 0
        return shared // self.step * self.step


# -- the Responses API ---------------------------------------------------------------------


@attrs.define
class Turn:
    """What the fake model says in one turn."""

    summary: str
    calls: int = 1
    """How many calls it asks for at once (0: the final answer)."""
    text: str = ""
    """Text before its calls, or its final answer."""


@attrs.define
class FakeResponses:
    """The Responses API of one model: ``calls`` turns of tool calls (``parallel_at``
    turns ask for two at once, ``text_at`` turns say something first), then ``final``.
    Everything it issued and everything that came back is kept for the tests."""

    calls: int = 5
    parallel_at: frozenset[int] = frozenset({3})
    text_at: frozenset[int] = frozenset({2})
    final: str = "All done."
    reasons: bool = True
    efforts: frozenset[str] = frozenset({"minimal", "low", "medium", "high"})
    requests: list[dict[str, Any]] = attrs.field(factory=list)
    replies: list[int] = attrs.field(factory=list)
    """The status of each answer, in order."""
    returned: list[list[str]] = attrs.field(factory=list)
    """The reasoning item ids each accepted request sent back."""
    issued: dict[str, str] = attrs.field(factory=dict)
    """Each reasoning item's id -> the encrypted content issued with it."""
    usages: list[dict[str, Any]] = attrs.field(factory=list)
    following: dict[str, str] = attrs.field(factory=dict)
    reasoning_of: dict[str, str] = attrs.field(factory=dict)
    cache: PrefixCache = attrs.field(factory=lambda: PrefixCache(1024, 128))
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))

    def __call__(self, recorded: Recorded) -> Reply:
        body = recorded.body or {}
        self.requests.append(body)
        reply = self._refusal(body) or self._answer(body)
        self.replies.append(reply.status)
        return reply

    def turn(self, number: int) -> Turn:
        if number > self.calls:
            return Turn(f"Turn {number}: every result is in.", 0, self.final)
        text = f"Turn {number}, calling. " if number in self.text_at else ""
        calls = 2 if number in self.parallel_at else 1
        return Turn(f"Turn {number}: **Planning**\nI should call the tool.", calls, text)

    # -- checks ------------------------------------------------------------------------------

    def _refusal(self, body: Mapping[str, Any]) -> Reply | None:
        if body.get("store") is not False:
            return openai_error(400, "this fake keeps nothing: send store: false", param="store")
        include = body.get("include") or []
        if ENCRYPTED in include and not self.reasons:
            return openai_error(400, "Encrypted content is not supported with this model.",
                                param="include")  # fmt: skip
        effort = (body.get("reasoning") or {}).get("effort")
        if effort is not None and effort not in self.efforts:
            allowed = ", ".join(f"'{e}'" for e in sorted(self.efforts))
            return openai_error(
                400,
                f"Unsupported value: 'reasoning.effort' does not support {effort!r} with this "
                f"model. Supported values are: {allowed}.",
                param="reasoning.effort",
                code="unsupported_value",
            )
        media = responses_problem(list(body.get("input") or []))
        if media is not None:
            return openai_error(400, media)
        return self._check_input(list(body.get("input") or []))

    def _check_input(self, items: list[Mapping[str, Any]]) -> Reply | None:
        back: list[str] = []
        calls: set[str] = set()
        answered: set[str] = set()
        for position, item in enumerate(items):
            kind = item.get("type")
            item_id = item.get("id")
            if kind == "reasoning":
                refused = self._check_reasoning(item, items[position + 1 : position + 2])
                if refused is not None:
                    return refused
                back.append(str(item_id))
            elif isinstance(item_id, str) and item_id in self.reasoning_of:
                needed = self.reasoning_of[item_id]
                if needed not in back:
                    return openai_error(
                        400,
                        f"Item '{item_id}' of type '{kind}' was provided without its required "
                        f"'reasoning' item: '{needed}'.",
                    )
            if kind == "function_call":
                calls.add(str(item.get("call_id")))
            elif kind == "function_call_output":
                call = str(item.get("call_id"))
                if call not in calls:
                    return openai_error(
                        400, f"No tool call found for function call output with call_id {call}."
                    )
                answered.add(call)
        for call in sorted(calls - answered):
            return openai_error(400, f"No tool output found for function call {call}.")
        self.returned.append(back)
        return None

    def _check_reasoning(
        self, item: Mapping[str, Any], after: Sequence[Mapping[str, Any]]
    ) -> Reply | None:
        item_id = str(item.get("id"))
        content = item.get("encrypted_content")
        if not isinstance(content, str):
            return openai_error(
                404,
                f"Item with id '{item_id}' not found. Items are not persisted when `store` is "
                "set to false. Try again with `store` set to true, or remove this item from "
                "your input.",
            )
        if self.issued.get(item_id) != content:
            return openai_error(
                400,
                f"The encrypted content for item {item_id} could not be verified. Reason: "
                "Encrypted content could not be decrypted or parsed.",
                param=None,
                code="invalid_encrypted_content",
            )
        expected = self.following.get(item_id)
        if expected is not None and (not after or after[0].get("id") != expected):
            return openai_error(
                400,
                f"Item '{item_id}' of type 'reasoning' was provided without its required "
                "following item.",
            )
        return None

    # -- answers -----------------------------------------------------------------------------

    def _answer(self, body: Mapping[str, Any]) -> Reply:
        items = list(body.get("input") or [])
        number = 1 + max((_turn_of(i.get("call_id")) for i in items), default=0)
        turn = self.turn(number)
        tools = body.get("tools") or []
        tool = tools[0]["name"] if tools else "none"
        n = next(self._ids)
        include = body.get("include") or []
        summarise = bool((body.get("reasoning") or {}).get("summary"))

        output: list[dict[str, Any]] = []
        reasoning: dict[str, Any] = {"id": f"rs_{n}", "type": "reasoning", "summary": []}
        if summarise:
            reasoning["summary"] = [{"type": "summary_text", "text": turn.summary}]
        if ENCRYPTED in include:
            reasoning["encrypted_content"] = self._seal(reasoning["id"], turn.summary)
        if self.reasons:
            output.append(reasoning)
            if ENCRYPTED in include:
                self.issued[reasoning["id"]] = reasoning["encrypted_content"]
        if turn.text:
            output.append(_message(f"msg_{n}", turn.text))
        for k in range(1, turn.calls + 1):
            arguments = json.dumps({"n": number * 10 + k})
            output.append(
                {"id": f"fc_{n}_{k}", "type": "function_call", "status": "completed",
                 "call_id": f"call_{number}_{k}", "name": tool, "arguments": arguments}
            )  # fmt: skip
        if self.reasons:
            if len(output) > 1:
                self.following[reasoning["id"]] = output[1]["id"]
            for item in output[1:]:
                self.reasoning_of[item["id"]] = reasoning["id"]

        usage = self._usage(body, turn, output)
        self.usages.append(usage)
        response = {"id": f"resp_{n}", "object": "response", "status": "completed",
                    "model": body.get("model"), "output": output, "usage": usage}  # fmt: skip
        return sse_reply(*_stream(response, summarise))

    def _seal(self, item_id: str, summary: str) -> str:
        mac = hmac.new(_SECRET, f"{item_id}\n{summary}".encode(), hashlib.sha256)
        return "gAAAA" + mac.hexdigest()

    def _usage(
        self, body: Mapping[str, Any], turn: Turn, output: list[dict[str, Any]]
    ) -> dict[str, Any]:
        prefix = [*(body.get("tools") or []), *(body.get("input") or [])]
        inputs = sum(tokens(item) for item in prefix)
        reasoning = 4 * tokens(turn.summary) if self.reasons else 0
        visible = sum(tokens(item) for item in output if item["type"] != "reasoning")
        return {
            "input_tokens": inputs,
            "input_tokens_details": {"cached_tokens": self.cache.read(prefix)},
            "output_tokens": reasoning + visible,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": inputs + reasoning + visible,
        }


def _turn_of(call_id: object) -> int:
    """The turn a call id of the fake's names (``call_{turn}_{k}``), else 0."""
    if isinstance(call_id, str) and call_id.startswith("call_"):
        head = call_id.split("_")[1]
        return int(head) if head.isdigit() else 0
    return 0


def _message(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _halves(text: str, split: bool = True) -> list[str]:
    middle = len(text) // 2 if split else len(text)
    return [piece for piece in (text[:middle], text[middle:]) if piece]


def _stream(response: dict[str, Any], summarise: bool, split: bool = True) -> list[str]:
    """The events of a streamed response, as the API sends them (each text in two
    deltas, or in one when not ``split``)."""
    seq = itertools.count()
    events: list[dict[str, Any]] = []
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    events.append({"type": "response.created", "response": start})
    for index, item in enumerate(response["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        kind = item["type"]
        added = {**item, "status": "in_progress"}
        if kind == "function_call":
            added["arguments"] = ""
        if kind == "message":
            added["content"] = []
        if kind == "reasoning":
            added = {"id": item["id"], "type": "reasoning", "summary": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        if kind == "reasoning" and summarise:
            for number, part in enumerate(item["summary"]):
                events.append({"type": "response.reasoning_summary_part.added", **at,
                               "summary_index": number,
                               "part": {"type": "summary_text", "text": ""}})  # fmt: skip
                for piece in _halves(part["text"]):
                    events.append({"type": "response.reasoning_summary_text.delta", **at,
                                   "summary_index": number, "delta": piece})  # fmt: skip
        elif kind == "message":
            for piece in _halves(item["content"][0]["text"], split):
                events.append({"type": "response.output_text.delta", **at,
                               "content_index": 0, "delta": piece, "logprobs": []})  # fmt: skip
        elif kind == "function_call":
            for piece in _halves(item["arguments"]):
                events.append({"type": "response.function_call_arguments.delta", **at,
                               "delta": piece})  # fmt: skip
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [event({**e, "sequence_number": next(seq)}) for e in events]


# -- the Responses wire, for the contract kit ------------------------------------------------


def responses_text_events(text: str, *, finish: bool = True) -> list[str]:
    """A plain answer's events, its text in one delta (the third event); without its
    ``response.completed`` when not ``finish``."""
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-test",
                "output": [_message("msg_1", text)] if text else [],
                "usage": {"input_tokens": 3, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 4}}  # fmt: skip
    events = _stream(response, summarise=False, split=False)
    return events if finish else events[:-1]


def responses_error_event(code: str, message: str) -> str:
    """The ``error`` event a stream may carry."""
    return event({"type": "error", "code": code, "message": message, "param": None,
                  "sequence_number": 1})  # fmt: skip


# -- a DeepSeek-style chat-completions server in thinking mode -------------------------------


@attrs.define
class FakeThinkingChat:
    """A chat-completions server that thinks before each answer, streams the thinking in
    ``field``, and (``enforce``) refuses an assistant tool-call message sent back without
    it. ``calls`` turns of tool calls (``parallel_at`` ask for two), then ``final``."""

    calls: int = 5
    parallel_at: frozenset[int] = frozenset({3})
    final: str = "All done."
    field: str = "reasoning_content"
    enforce: bool = True
    text_only: bool = False
    """A text-only model (as vLLM serves one): any image part is refused with vLLM's 400."""
    requests: list[dict[str, Any]] = attrs.field(factory=list)
    replies: list[int] = attrs.field(factory=list)
    thoughts: list[str] = attrs.field(factory=list)
    """The reasoning issued, turn by turn."""
    returned: list[list[str | None]] = attrs.field(factory=list)
    """What each accepted request sent back in ``field`` on its assistant messages."""
    usages: list[dict[str, Any]] = attrs.field(factory=list)
    cache: PrefixCache = attrs.field(factory=lambda: PrefixCache(0, 64))

    def __call__(self, recorded: Recorded) -> Reply:
        body = recorded.body or {}
        self.requests.append(body)
        reply = self._refusal(body) or self._answer(body)
        self.replies.append(reply.status)
        return reply

    def thought(self, number: int) -> str:
        return f"Turn {number}: the tool answers this, so I call it."

    def _refusal(self, body: Mapping[str, Any]) -> Reply | None:
        if self.text_only and any(
            isinstance(part, Mapping) and part.get("type") == "image_url"
            for message in body.get("messages") or []
            for part in (message.get("content") if isinstance(message.get("content"), list) else [])
        ):
            return json_reply(
                {"object": "error", "message": f"{body.get('model')} is not a multimodal model None",
                 "type": "BadRequestError", "param": None, "code": 400},
                400,
            )  # fmt: skip
        media = chat_problem(list(body.get("messages") or []))
        if media is not None:
            return openai_error(400, media, param="messages")
        back: list[str | None] = []
        for message in body.get("messages") or []:
            if message.get("role") != "assistant":
                continue
            text = message.get(self.field)
            back.append(text if isinstance(text, str) else None)
            if self.enforce and message.get("tool_calls") and not isinstance(text, str):
                return json_reply(
                    {"error": {"message": "The `reasoning_content` in the thinking mode must be "
                               "passed back to the API.", "type": "invalid_request_error",
                               "param": None, "code": "invalid_request_error"}},
                    400,
                )  # fmt: skip
        self.returned.append(back)
        return None

    def _answer(self, body: Mapping[str, Any]) -> Reply:
        messages = list(body.get("messages") or [])
        ids = [c.get("id") for m in messages for c in m.get("tool_calls") or ()]
        number = 1 + max((_turn_of(i) for i in ids), default=0)
        thought = self.thought(number)
        self.thoughts.append(thought)
        tools = body.get("tools") or []
        tool = tools[0]["function"]["name"] if tools else "none"
        chunks = [_chat({"role": "assistant", "content": None, self.field: ""})]
        chunks += [_chat({"content": None, self.field: piece}) for piece in _halves(thought)]
        if number > self.calls:
            visible: Any = self.final
            chunks += [_chat({"content": piece, self.field: None}) for piece in _halves(visible)]
            finish = "stop"
        else:
            visible = []
            for k in range(1 + (number in self.parallel_at)):
                call = {"index": k, "id": f"call_{number}_{k + 1}", "type": "function",
                        "function": {"name": tool, "arguments": ""}}  # fmt: skip
                arguments = json.dumps({"n": number * 10 + k + 1})
                visible.append({**call, "function": {"name": tool, "arguments": arguments}})
                chunks.append(_chat({"tool_calls": [call]}))
                for piece in _halves(arguments):
                    chunks.append(_chat({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}))  # fmt: skip
            finish = "tool_calls"
        chunks.append(_chat({}, finish))
        prefix = [*tools, *messages]
        inputs = sum(tokens(m) for m in prefix)
        cached = self.cache.read(prefix)
        reasoning = 4 * tokens(thought)
        completion = reasoning + tokens(visible)
        usage = {
            "prompt_tokens": inputs,
            "completion_tokens": completion,
            "total_tokens": inputs + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
            "prompt_cache_hit_tokens": cached,
            "prompt_cache_miss_tokens": inputs - cached,
        }
        self.usages.append(usage)
        chunks.append(data({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                            "model": body.get("model"), "choices": [], "usage": usage}))  # fmt: skip
        return sse_reply(*chunks, "data: [DONE]\n\n")


def _chat(delta: dict[str, Any], finish: str | None = None) -> str:
    return data({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                 "model": "deepseek-test",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip


# -- driving a fake through the real runtime ---------------------------------------------------


@attrs.define
class Looped:
    """A tool loop's result and the events it reported, in order."""

    result: ToolCallRunResult
    events: list[RunEvent]

    def streamed(self) -> list[tuple[str, int, str]]:
        """Reasoning and text as they streamed: (kind, iteration, text)."""
        return [
            ("reasoning" if isinstance(e, ReasoningDelta) else "text", e.iteration, e.text)
            for e in self.events
            if isinstance(e, ReasoningDelta | MessageDelta)
        ]

    def usage(self) -> list[Usage | None]:
        return [e.usage for e in self.events if isinstance(e, IterationFinished)]


class _Collect(EventSink):
    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def on_event(self, event: RunEvent, /) -> None:
        self.events.append(event)


ECHO = ToolSpec(
    "t/echo",
    "Echo n.",
    {"type": "object", "properties": {"n": {"type": "integer"}}},
    lambda inputs: f"n={inputs.get('n')}",
)


async def run_loop(
    caller: LLMCaller,
    prompt: str = "Call the tool until you are done.",
    *,
    system_prompt: str | None = None,
    history: Sequence[Message] | None = None,
) -> Looped:
    """``prompt`` through the real ``ToolCallingRuntime`` with ``caller`` and the echo
    tool, within :data:`WAIT_S` per iteration."""
    registry = ToolRegistry()
    registry.register(ECHO)
    sink = _Collect()
    runtime = ToolCallingRuntime(registry, ToolRunner(registry), caller, max_iterations=10)
    async with asyncio.timeout(10 * WAIT_S):
        result = await runtime.arun_tool_loop(
            prompt, system_prompt=system_prompt, history=history, sink=sink
        )
    return Looped(result, sink.events)
