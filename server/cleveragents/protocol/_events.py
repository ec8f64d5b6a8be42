"""Run events as notifications: each core event to its wire class and JSON text.

``EventEncoder`` (one per run) turns each event of ``RUN_EVENTS`` into its method and
params text, once: the transcript writes that text and the LSP face sends it as it is.
A record's text is kept for the run's result, which is assembled from those texts
(never encoded twice), in chunks between which the event loop runs, and trimmed to fit
one frame (see :func:`fit`). Events not in the table (``IterationStarted``) have no
text.
"""

from __future__ import annotations

import asyncio
import logging
import os
import typing
from collections.abc import Callable
from typing import Any

import attrs

from ..tool import RunEvent, RunFinished, RunResult, ToolCallFinished, Usage
from . import _types as t
from ._converter import converter, dumps, unstructure
from ._framing import MAX_BODY
from ._methods import RUN_EVENTS

logger = logging.getLogger(__name__)


def usage_wire(usage: Usage | None) -> t.UsageWire | None:
    if usage is None:
        return None
    return t.UsageWire(
        usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
        usage.cache_write_tokens, usage.reasoning_tokens,
    )  # fmt: skip


def result_wire(result: RunResult) -> t.RunResult:
    """The wire form of a run's outcome (the ``run/start`` reply)."""
    error = result.error
    return t.RunResult(
        result.run_id, result.status, result.content, result.tool_call_history,
        result.iterations, result.terminated_by_limit, result.duration_ms,
        t.RunError(error.code, error.message) if error is not None else None,
        usage_wire(result.usage), result.omitted_records, result.limit_reason,  # type: ignore[arg-type]
    )  # fmt: skip


_CONVERT: dict[Any, Callable[[Any], Any]] = {
    t.UsageWire | None: usage_wire,
    t.RunResult: result_wire,
}
"""Wire field types whose values are not the core's own objects, and how to make them."""


def _wire_maker(wire: type) -> Callable[[RunEvent], Any]:
    """The wire object of an event: ``run_id``, ``seq``, then the event's own fields by
    name, each converted where the wire type differs (usage, the result)."""
    hints = typing.get_type_hints(wire)
    fields = [f.name for f in attrs.fields(wire) if f.name not in ("run_id", "seq")]
    steps = [(name, _CONVERT.get(hints[name])) for name in fields]

    def make(event: RunEvent) -> Any:
        values = [
            getattr(event, name) if convert is None else convert(getattr(event, name))
            for name, convert in steps
        ]
        return wire(event.run_id, event.seq, *values)

    return make


_MAKERS: dict[type, tuple[str, Callable[[RunEvent], Any]]] = {}
"""Each run event's method and wire maker, built at its first use (see ``_made``)."""


def _made(
    table: dict[type, tuple[str, Callable[[RunEvent], Any]]],
    cls: type,
    build: Callable[[type, type], Callable[[RunEvent], Any]],
) -> tuple[str, Callable[[RunEvent], Any]] | None:
    """``table``'s entry for event class ``cls``, built by ``build(cls, wire class)`` the
    first time: building every event's maker (cattrs code, type hints) at import cost
    the daemon ~5 ms before its ``initialize`` reply, for events no run had sent yet.
    ``None`` for a class not in ``RUN_EVENTS``."""
    found = table.get(cls)
    if found is None:
        method = RUN_EVENTS.get(cls)
        if method is None:
            return None
        found = table[cls] = (method.name, build(cls, method.params))
    return found


def _same_shape(core: Any, wire: Any) -> bool:
    """Whether a core value's class reads as the wire class does: both attrs classes
    with the same field names (a wire field whose type is ``X | None`` compares ``X``)."""
    core_args, wire_args = typing.get_args(core) or (core,), typing.get_args(wire) or (wire,)
    if len(core_args) != len(wire_args):
        return False
    return all(
        c is w or not attrs.has(w) or (attrs.has(c) and _names(c) == _names(w))
        for c, w in zip(core_args, wire_args, strict=True)
    )


def _names(cls: Any) -> list[str]:
    return [f.name for f in attrs.fields(cls)]


def _params_maker(event: type, wire: type) -> Callable[[RunEvent], Any]:
    """The params dict of an event's notification. The wire class's own unstructure
    hook reads the event directly (same field names, by the decorator's check), which
    skips building a wire object per event: a run sends one per tool call. It is used
    only when every field's core class reads as its wire class does (``Usage`` and
    ``UsageWire``: the same names); otherwise the event goes through its wire object."""
    core_hints, wire_hints = typing.get_type_hints(event), typing.get_type_hints(wire)
    names = [f.name for f in attrs.fields(wire)]
    if all(_same_shape(core_hints[n], wire_hints[n]) for n in names):
        hook: Callable[[RunEvent], Any] = converter.get_unstructure_hook(wire)
        return hook
    make = _wire_maker(wire)
    return lambda e: unstructure(make(e))


_PARAMS: dict[type, tuple[str, Callable[[RunEvent], Any]]] = {}
"""Each run event's method and params maker, built at its first use (``_made``)."""


def wire_notification(event: RunEvent) -> tuple[str, Any] | None:
    """The method and wire object of an event; ``None`` for one not sent on the wire."""
    found = _made(_MAKERS, type(event), lambda _event, wire: _wire_maker(wire))
    return None if found is None else (found[0], found[1](event))


class EventEncoder:
    """One run's events as JSON text, each encoded once (see the module docstring)."""

    def __init__(self) -> None:
        self.record_texts: dict[int, str] = {}
        """Each record's JSON text as sent in its ``run/toolCall``, by ``id(record)``."""
        self._record_frame: tuple[str, str, str] | None = None
        """``run/toolCall`` params cut around ``seq`` and ``record``: each record is then
        encoded once, and its notification costs a format."""

    def encode(self, event: RunEvent) -> tuple[str, str] | None:
        """(method, params text) of one event; ``None`` for one not on the wire."""
        if event.__class__ is ToolCallFinished:
            return _TOOL_CALL, self._record(event)
        found = _made(_PARAMS, event.__class__, _params_maker)
        if found is None:
            return None
        return found[0], _encode(found[1](event))

    def _record(self, event: ToolCallFinished) -> str:
        if self._record_frame is None:  # once per run: the params around seq and record
            payload = unstructure(t.ToolCallNotification(event.run_id, 0, event.record))
            payload["seq"], payload["record"] = _SEQ, _RAW
            head = _encode(payload)
            at, end = head.index(_SEQ_JSON), head.index(_RAW_JSON)
            self._record_frame = (
                head[:at], head[at + len(_SEQ_JSON) : end], head[end + len(_RAW_JSON) :]
            )  # fmt: skip
        before, between, after = self._record_frame
        record = event.record
        text = _encode(unstructure(record))
        self.record_texts[id(record)] = text
        return f"{before}{event.seq}{between}{text}{after}"

    async def encode_finished(self, event: RunFinished) -> tuple[str, str, str]:
        """(method, params text, result text) of ``run/finished``: the result is
        assembled from the records' texts in chunks, yielding to the event loop in
        between, and trimmed first if it would not fit one frame."""
        result = result_wire(event.result)
        text = await self._result_text(result, event.run_id)
        empty = attrs.evolve(result, tool_call_history=[])
        payload = unstructure(t.RunFinishedNotification(event.run_id, event.seq, empty))
        event.result.omitted_records = result.omitted_records
        self.record_texts = {}
        return _FINISHED, _splice(payload, "result", text), text

    async def _result_text(self, result: t.RunResult, run_id: str) -> str:
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
                run_id, omitted,
            )  # fmt: skip
        payload = unstructure(result)
        result.tool_call_history = history[omitted:]
        records = ",".join(texts[omitted:])
        await asyncio.sleep(0)
        text = _splice(payload, "toolCallHistory", "[", records, "]")
        await asyncio.sleep(0)
        return text


_TOOL_CALL = RUN_EVENTS[ToolCallFinished].name
_FINISHED = RUN_EVENTS[RunFinished].name
_CHUNK = 2000
"""Records handled between two yields to the event loop while a run ends."""

_RAW = "\x00raw-" + os.urandom(16).hex()  # secrets.token_hex's bytes, without hashlib
_RAW_JSON = dumps(_RAW)
_SEQ = "\x00seq-" + os.urandom(16).hex()
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
