"""One run while it is live: its identity, cancel token and transcript, and the numbered
notifications it sends (``run/started`` ... ``run/finished``).

``Run`` serialises each notification once, for the wire and the transcript alike, and
assembles the ``RunResult`` from the records' texts as they were sent, so ending a run
of 100,000 records encodes nothing twice and never blocks the event loop for long.
``RunSink`` is the loop's event sink for one run: loop events become notifications.

It knows the wire classes and the ``Peer``, not JSON-RPC nor the run manager.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from typing import Any

import attrs

from ..protocol import MAX_BODY, RawJson, dumps, unstructure, wire
from ..protocol import methods as m
from ..tool import (
    CancelToken,
    IterationSummary,
    ToolCall,
    ToolCallRecord,
    ToolCallRunResult,
    ToolRegistry,
    Usage,
)
from ..transcripts import Transcript
from ..workspace import PinnedRoot
from ._mcp import McpServers
from ._peer import Peer

logger = logging.getLogger(__name__)


@attrs.define(eq=False)
class Run:
    """One active run: its identity, cancel token, notification counter and transcript."""

    run_id: str
    prompt: str
    sandbox_root: str
    resource_bindings: dict[str, Any]
    registry: ToolRegistry
    transcript: Transcript
    peer: Peer
    cancel: CancelToken = attrs.field(factory=CancelToken)
    seq: int = 0
    finished: bool = False
    iterations: int = 0
    tool_call_count: int = 0
    started_at: str = ""
    started: float = 0.0
    work_done_token: str | int | None = None
    task: asyncio.Task[wire.RunResult] | None = None
    on_llm_delta: Callable[[int, str], None] | None = None
    pinned: PinnedRoot | None = None
    """The sandbox root as pinned at run/start: every tool call checks it still is."""
    mcp: McpServers | None = None
    """The run's own MCP servers (``run/start.mcpServers``), stopped when it ends."""

    record_texts: dict[int, str] = attrs.field(factory=dict)
    """Each record's JSON text as sent in its ``run/toolCall``, by ``id(record)``: the
    result is assembled from them, so ending a run of 100,000 records encodes nothing
    twice and never blocks the event loop for long."""
    result_text: RawJson | None = None
    """The RunResult's JSON text once the run ended: the ``run/start`` reply."""
    _record_frame: tuple[str, str, str] | None = None
    """``run/toolCall`` params as made from the wire class, cut around ``seq`` and
    ``record``: each record is then encoded once, and its notification costs a format."""

    def emit(self, method: str, notification: Any) -> None:
        """Send one numbered notification and log it; nothing after ``run/finished``.

        ``notification`` is the method's wire class; its ``seq`` is set here. The params
        are serialised once, for the wire and the transcript alike."""
        if self.finished:
            return
        self.seq += 1
        notification.seq = self.seq
        self._send(method, _encode(unstructure(notification)))

    def emit_record(self, record: ToolCallRecord) -> None:
        """``run/toolCall``, keeping the record's own text for the result."""
        if self.finished:
            return
        self.seq += 1
        if self._record_frame is None:  # once per run: the params around seq and record
            payload = unstructure(wire.ToolCallNotification(self.run_id, self.seq, record))
            payload["seq"], payload["record"] = _SEQ, _RAW
            head = _encode(payload)
            at, end = head.index(_SEQ_JSON), head.index(_RAW_JSON)
            self._record_frame = (
                head[:at], head[at + len(_SEQ_JSON) : end], head[end + len(_RAW_JSON) :]
            )  # fmt: skip
        before, between, after = self._record_frame
        text = _encode(unstructure(record))
        self.record_texts[id(record)] = text
        self._send(m.RUN_TOOL_CALL, f"{before}{self.seq}{between}{text}{after}")

    async def emit_finished(self, result: wire.RunResult) -> RawJson:
        """``run/finished``; returns the result's JSON text, which the reply reuses.

        A result of many records is megabytes of text: it is assembled in chunks and
        written to the transcript from a thread, yielding to the event loop in between,
        so other runs and requests are served while it ends. The result is trimmed first
        if it would not fit one frame (see :func:`fit`)."""
        await asyncio.sleep(0)  # the loop's own ending ran in the step before this one
        text = await self._result_text(result)
        if not self.finished:
            self.seq += 1
            empty = attrs.evolve(result, tool_call_history=[])
            payload = unstructure(wire.RunFinishedNotification(self.run_id, self.seq, empty))
            params = _splice(payload, "result", text.text)
            await asyncio.sleep(0)
            if len(params) > _INLINE_WRITE:
                await asyncio.to_thread(self.transcript.append_raw, m.RUN_FINISHED, params)
            else:
                self.transcript.append_raw(m.RUN_FINISHED, params)
            self.peer.notify_json(m.RUN_FINISHED, params)
            self.finished = True
            await asyncio.sleep(0)
        self.result_text = text
        self.record_texts = {}
        return text

    async def _result_text(self, result: wire.RunResult) -> RawJson:
        history = result.tool_call_history
        cached = self.record_texts
        texts: list[str] = []
        for start in range(0, len(history), _CHUNK):
            chunk = history[start : start + _CHUNK]
            texts.extend(cached.get(id(r)) or _encode(unstructure(r)) for r in chunk)
            await asyncio.sleep(0)
        result.tool_call_history = []
        omitted = fit(texts, len(_encode(unstructure(result)).encode("utf-8")))
        if omitted:
            result.omitted_records = omitted
            logger.warning(
                "run %s: left %d records out of its result to fit the frame limit",
                self.run_id, omitted,
            )  # fmt: skip
        payload = unstructure(result)
        result.tool_call_history = history[omitted:]
        records = ",".join(texts[omitted:])
        await asyncio.sleep(0)
        text = RawJson(_splice(payload, "toolCallHistory", "[", records, "]"))
        await asyncio.sleep(0)
        return text

    def _send(self, method: str, text: str) -> None:
        self.transcript.append_raw(method, text)
        self.peer.notify_json(method, text)
        if method == m.RUN_FINISHED:
            self.finished = True


_CHUNK = 2000
"""Records handled between two yields to the event loop while a run ends."""
_INLINE_WRITE = 1024 * 1024
"""Transcript lines longer than this are written from a thread (the write releases the
GIL; the event loop goes on)."""

_RAW = "\x00raw-" + secrets.token_hex(16)
_RAW_JSON = dumps(_RAW)
_SEQ = "\x00seq-" + secrets.token_hex(16)
_SEQ_JSON = dumps(_SEQ)


def _splice(payload: dict[str, Any], key: str, *raw: str) -> str:
    """The JSON text of ``payload`` with ``payload[key]`` replaced by ``raw`` (the pieces of
    JSON text made already, joined in one copy). The placeholder is random per process,
    so no value a model or a client sends can be taken for it."""
    payload[key] = _RAW
    head = _encode(payload)
    at = head.index(_RAW_JSON)
    return "".join((head[:at], *raw, head[at + len(_RAW_JSON) :]))


def _encode(payload: Any) -> str:
    """JSON text of a payload; a non-finite number (which only a model's arguments can
    still hold here: tool outputs are checked by the output cap) becomes null."""
    try:
        return dumps(payload)
    except ValueError:
        logger.warning("replaced a non-finite number with null in a notification")
        return dumps(_finite(payload))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


FRAME_ROOM = MAX_BODY - 64 * 1024
"""What a RunResult may take in its frame: the limit less room for the envelope."""


def fit(texts: list[str], head_bytes: int) -> int:
    """How many of the oldest records to leave out of a result so that it fits one frame
    (each was already sent in its own ``run/toolCall`` and is in the transcript)."""
    room = FRAME_ROOM - head_bytes
    if sum(map(len, texts)) + len(texts) <= room // 4:  # 4 bytes per character at most
        return 0
    kept = 0
    for text in reversed(texts):
        size = (len(text) if text.isascii() else len(text.encode("utf-8"))) + 1
        if size > room:
            break
        room -= size
        kept += 1
    return len(texts) - kept


class RunSink:
    """The loop's event sink for one run: events become notifications (the loop never
    touches the transport; see ``docs/runtime.md``)."""

    def __init__(self, run: Run, max_iterations: int) -> None:
        self.run = run
        self.max_iterations = max_iterations

    def on_iteration_started(self, iteration: int) -> None:
        self.run.iterations = iteration

    def on_message_delta(self, iteration: int, text: str) -> None:
        if text:
            run = self.run
            delta = wire.MessageDeltaNotification(run.run_id, 0, iteration, text)
            run.emit(m.RUN_MESSAGE_DELTA, delta)

    def on_tool_call_started(self, iteration: int, call: ToolCall) -> None:
        run = self.run
        started = wire.ToolCallStartedNotification(
            run.run_id, 0, iteration, call.id, call.name, call.arguments
        )
        run.emit(m.RUN_TOOL_CALL_STARTED, started)

    def on_tool_call(self, record: ToolCallRecord) -> None:
        run = self.run
        run.tool_call_count += 1
        run.emit_record(record)

    def on_iteration(self, summary: IterationSummary) -> None:
        run = self.run
        run.emit(
            m.RUN_ITERATION,
            wire.IterationNotification(
                run.run_id, 0, summary.iteration, summary.content, summary.tool_call_count,
                summary.duration_ms, usage_wire(summary.usage),
            ),
        )  # fmt: skip
        token = run.work_done_token
        if token is not None:
            percentage = min(100, summary.iteration * 100 // self.max_iterations)
            run.peer.progress(token, "report", f"iteration {summary.iteration} done", percentage)

    def on_finished(self, result: ToolCallRunResult) -> None:
        pass  # the manager sends run/finished itself, with the run's status


def usage_wire(usage: Usage | None) -> wire.UsageWire | None:
    return None if usage is None else wire.UsageWire(usage.input_tokens, usage.output_tokens)
