"""``RunRecorder``: a run's events written to its transcript as they happen.

Each event the protocol's table puts on the wire is numbered (``seq``, from 1), encoded
once by the protocol's ``EventEncoder`` and appended as a line; the text is handed back
so that a face sending the same notification never encodes it again. Events the table
does not carry are neither numbered nor written, except two that only transcripts keep
(not notifications, not numbered): ``AssistantMessage``, whose reasoning and provider
state make a ``$/assistant`` line, so that ``continueFrom`` sends them back after a
restart, and ``HistoryRewritten``, whose ``$/compaction`` line lets ``continueFrom``
rebuild the compacted conversation, not the original.
"""

from __future__ import annotations

import asyncio

from ..protocol import EventEncoder
from ..tool import AssistantMessage, HistoryRewritten, Message, RunEvent, RunFinished
from ._files import Transcript

ASSISTANT = "$/assistant"
"""A transcript line with an assistant message's reasoning and provider state."""
COMPACTION = "$/compaction"
"""A transcript line with what a compaction changed: pruned outputs' stubs by call id,
or a summary and the first iteration of the run it kept whole."""

_INLINE_WRITE = 1024 * 1024
"""Lines longer than this are written from a thread (the write releases the GIL; the
event loop goes on)."""


class RunRecorder:
    """Writes one run's events to its transcript (see the module docstring)."""

    __slots__ = ("_encode", "encoder", "seq", "transcript")

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self.encoder = EventEncoder()
        self._encode = self.encoder.encode
        self.seq = 0

    def record(self, event: RunEvent) -> str | None:
        """Number, encode and write one event; its params text, or ``None`` when the
        event is not one the transcript keeps."""
        if event.__class__ is AssistantMessage:
            assert isinstance(event, AssistantMessage)
            self.transcript.append(ASSISTANT, assistant_line(event.iteration, event.message))
            return None
        if event.__class__ is HistoryRewritten:
            assert isinstance(event, HistoryRewritten)
            line: dict[str, object] = {"iteration": event.iteration}
            if event.pruned:
                line["pruned"] = event.pruned
            if event.summary is not None:
                line["summary"] = event.summary
                line["keptFromIteration"] = event.kept_from_iteration
            self.transcript.append(COMPACTION, line)
            return None
        seq = self.seq + 1
        event.seq = seq
        encoded = self._encode(event)
        if encoded is None:
            event.seq = 0
            return None
        self.seq = seq
        method, text = encoded
        self.transcript.append_raw(method, text)
        return text

    async def finish(self, event: RunFinished) -> tuple[str, str]:
        """Write ``run/finished``: (its params text, the result's text)."""
        self.seq += 1
        event.seq = self.seq
        method, params, result = await self.encoder.encode_finished(event)
        await asyncio.sleep(0)
        if len(params) > _INLINE_WRITE:
            await asyncio.to_thread(self.transcript.append_raw, method, params)
        else:
            self.transcript.append_raw(method, params)
        return params, result

    def failure(self) -> str | None:
        """Why the transcript cannot be written (naming the state dir); None if it can."""
        return self.transcript.failure_message()


def assistant_line(iteration: int, message: Message) -> dict[str, object]:
    """The ``$/assistant`` params of a message: what the other lines do not carry."""
    line: dict[str, object] = {"iteration": iteration}
    if message.origin is not None:
        line["origin"] = message.origin
    if message.reasoning:
        line["reasoning"] = [
            {"text": r.text, **({"state": r.state} if r.state is not None else {})}
            for r in message.reasoning
        ]
    if message.state is not None:
        line["state"] = message.state
    calls = {c.id: c.state for c in message.tool_calls if c.state is not None}
    if calls:
        line["callStates"] = calls
    return line
