"""A finished run's conversation, rebuilt from its transcript (``continueFrom`` of a run
no longer in memory).

The prompt comes from ``$/meta``; then, per iteration that ended (a ``run/iteration``
line), the assistant message with its tool calls (``run/toolCallStarted``), its
reasoning and provider state (``$/assistant``, when it had any), and one tool message
per call (its ``run/toolCall`` record, worded as the runtime words it). The system
prompt is not in transcripts; the next run brings its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cleveragents.tool import Message, Reasoning, ToolCall, result_message

from ..protocol import methods as m
from ._files import int_field
from ._index import META
from ._recorder import ASSISTANT, COMPACTION


class Rebuilt:
    """One run's own messages, whether it finished, the run it continued (``None`` when a
    summary replaced everything before), and the stubs of outputs it pruned, by call id
    (they may be outputs of the runs it continued). A fork's parent is the run it forked,
    up to its iteration ``parent_until``; ``iterations``: how many iterations ended."""

    __slots__ = ("finished", "iterations", "messages", "parent", "parent_until", "pruned")

    def __init__(
        self,
        messages: list[Message],
        finished: bool,
        parent: str | None,
        pruned: dict[str, str] | None = None,
        parent_until: int | None = None,
        iterations: int = 0,
    ) -> None:
        self.messages = messages
        self.finished = finished
        self.parent = parent
        self.pruned = pruned or {}
        self.parent_until = parent_until
        self.iterations = iterations


def rebuild(events: Iterable[dict[str, Any]], until: int | None = None) -> Rebuilt:
    """The messages of one transcript's events (``$/meta.continueFrom``, or a fork's
    ``$/meta.forkFrom``, names the parent); with ``until``, only its iterations up to and
    including that one (a fork of it)."""
    meta: dict[str, Any] = {}
    calls: dict[int, list[ToolCall]] = {}
    records: dict[int, list[dict[str, Any]]] = {}
    ended: list[tuple[int, str]] = []  # (iteration, content) of each run/iteration
    kept: dict[int, dict[str, Any]] = {}  # $/assistant lines by iteration
    pruned: dict[str, str] = {}
    summary: tuple[str, int] | None = None  # the last summary, and the iteration it kept from
    finished = False
    for event in events:
        method, params = event.get("method"), event["params"]
        if method == META and not meta:
            meta = params
        elif method == m.RUN_TOOL_CALL_STARTED:
            arguments = params.get("inputs")
            calls.setdefault(int_field(params.get("iteration")), []).append(
                ToolCall(
                    str(params.get("callId", "")), str(params.get("toolName", "")),
                    arguments if isinstance(arguments, dict) else {},
                )
            )  # fmt: skip
        elif method == m.RUN_TOOL_CALL and isinstance(params.get("record"), dict):
            record = params["record"]
            records.setdefault(int_field(record.get("iteration")), []).append(record)
        elif method == m.RUN_ITERATION:
            iteration = int_field(params.get("iteration"))
            if until is None or iteration <= until:
                ended.append((iteration, str(params.get("content", ""))))
        elif method == m.RUN_FINISHED:
            finished = True
        elif method == ASSISTANT:
            kept[int_field(params.get("iteration"))] = params
        elif method == COMPACTION:
            if until is not None and int_field(params.get("iteration")) > until:
                continue  # compacted for a later iteration than the fork keeps
            stubs = params.get("pruned")
            if isinstance(stubs, dict):
                pruned.update({str(k): v for k, v in stubs.items() if isinstance(v, str)})
            if isinstance(params.get("summary"), str):
                kept_from = params.get("keptFromIteration")
                summary = (params["summary"], kept_from if isinstance(kept_from, int) else 0)
    prompt = Message("user", str(meta.get("prompt", "")))
    messages = [prompt]
    if summary is not None:
        messages.append(Message("user", summary[0]))
    for iteration, content in ended:
        if summary is not None and (summary[1] == 0 or iteration < summary[1]):
            continue  # summarised: the summary message stands for it
        own_calls = calls.get(iteration, [])
        message = Message("assistant", content, own_calls)
        if iteration in kept:
            _restore_state(message, kept[iteration])
        messages.append(message)
        messages.extend(_tool_messages(own_calls, records.get(iteration, [])))
    for message in messages:
        stub = pruned.get(message.tool_call_id or "") if message.role == "tool" else None
        if stub is not None:
            message.content = stub
            message.media = []  # a pruned output's images went with it
    parent = meta.get("continueFrom")
    parent_until = None
    fork = meta.get("forkFrom")
    if isinstance(fork, dict) and isinstance(fork.get("runId"), str):
        parent, parent_until = fork["runId"], int_field(fork.get("iteration"))
    if summary is not None or not (isinstance(parent, str) and parent):
        parent = None  # a summary stands for the runs before too
    return Rebuilt(messages, finished, parent, pruned, parent_until, len(ended))


def _restore_state(message: Message, line: dict[str, Any]) -> None:
    """Put a ``$/assistant`` line's reasoning and provider state back on its message;
    parts of the wrong shape are left out (a torn or hand-edited line)."""
    origin = line.get("origin")
    message.origin = origin if isinstance(origin, str) else None
    reasoning = line.get("reasoning")
    for part in reasoning if isinstance(reasoning, list) else ():
        if isinstance(part, dict) and isinstance(part.get("text", ""), str):
            state = part.get("state")
            message.reasoning.append(
                Reasoning(part.get("text", ""), state if isinstance(state, dict) else None)
            )
    state = line.get("state")
    message.state = state if isinstance(state, dict) else None
    states = line.get("callStates")
    if isinstance(states, dict):
        for call in message.tool_calls:
            found = states.get(call.id)
            call.state = found if isinstance(found, dict) else None


def _tool_messages(calls: list[ToolCall], records: list[dict[str, Any]]) -> list[Message]:
    """One tool message per call, in the model's order, worded as the runtime words them:
    the output as text, or the error of a failed record."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for each in records:
        by_id.setdefault(str(each.get("callId", "")), []).append(each)
    out = []
    for call in calls:
        pending = by_id.get(call.id)
        record = pending.pop(0) if pending else None
        if record is None:
            text = "the tool call has no record in the transcript"
            out.append(Message("tool", text, [], call.id, call.name, True))
        elif record.get("success") is True:  # media apart, as the runtime words them
            out.append(result_message(record.get("output"), call.id, call.name))
        else:
            text = str(record.get("error") or "the tool failed")
            out.append(Message("tool", text, [], call.id, call.name, True))
    return out
