"""A live run: its identity, cancel token and transcript, the event sink the loop
reports to, and the ``RunHandle`` a face holds.

Every event goes, in order, to the transcript (``RunRecorder``, which numbers and
encodes it once), then to the face's observer with that text, then to the handle's
``events()`` when nobody observes. A transcript that cannot be written stops the run at
once: its end is ``failed`` with the state dir's error, and nothing more is called. The
text streamed in an iteration that has not ended is kept, so that a cancelled run's
result says what the model had said by then.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from ..tool import (
    CancelToken,
    EventSink,
    IterationFinished,
    IterationStarted,
    MessageDelta,
    RunEvent,
    RunFinished,
    RunResult,
    ToolCallFinished,
    ToolRegistry,
    Usage,
)
from ..transcripts import RunRecorder
from ..workspace import PinnedRoot
from ._mcp import McpServers
from ._mcp_hooks import Sampler

if TYPE_CHECKING:
    from ._checkpoints import RunCheckpoints

TRANSCRIPT_FAILED = "the transcript cannot be written"
"""The cancel reason of a run stopped by its transcript."""


class RunObserver(Protocol):
    """A face's view of its runs' events."""

    def on_event(self, event: RunEvent, text: str | None, /) -> None:
        """One event, in order. ``text`` is its notification's JSON params as the
        transcript recorded them (``None`` for an event the transcript does not keep):
        a face that sends the same notification sends it as it is."""
        ...


class Run(EventSink):
    """One active run (see the module docstring); the loop's event sink."""

    def __init__(
        self,
        run_id: str,
        prompt: str,
        sandbox_root: str,
        registry: ToolRegistry,
        recorder: RunRecorder,
        observer: RunObserver | None,
        pinned: PinnedRoot | None,
    ) -> None:
        self.run_id = run_id
        self.prompt = prompt
        self.sandbox_root = sandbox_root
        self.registry = registry
        self.recorder = recorder
        self.observer = observer
        self.pinned = pinned
        self.cancel = CancelToken()
        self.iterations = 0
        self.tool_call_count = 0
        self.started_at = ""
        self.started = 0.0
        self.finished = False
        self.task: asyncio.Task[RunResult] | None = None
        self.mcp: McpServers | None = None
        """The run's own MCP servers, stopped when it ends."""
        self.sampler: Sampler | None = None
        """The run's profile and model, which its MCP servers' sampling requests use."""
        self.used: Usage | None = None
        """The tokens its finished iterations' model calls reported."""
        self.result_text: str | None = None
        self.buffer: collections.deque[RunEvent] | None = (
            collections.deque() if observer is None else None
        )
        self.wakeup: asyncio.Event | None = None
        self.streaming: list[str] = []
        """The text streamed so far in an iteration that has not ended."""
        self.checkpoints: RunCheckpoints | None = None
        """The run's checkpoints (``None``: it takes none)."""

    def on_event(self, event: RunEvent, /) -> None:
        if self.finished:
            return
        event.run_id = self.run_id
        if isinstance(event, MessageDelta):
            self.streaming.append(event.text)
        elif event.__class__ is ToolCallFinished:
            self.tool_call_count += 1
        elif isinstance(event, IterationStarted):
            self.iterations = event.iteration
            self.streaming = []
        elif event.__class__ is IterationFinished:
            assert isinstance(event, IterationFinished)
            self.streaming = []
            if event.usage is not None:
                used = self.used
                self.used = event.usage if used is None else used + event.usage
        recorder = self.recorder
        text = recorder.record(event)
        if recorder.transcript.error is not None and not self.cancel.cancelled:
            self.cancel.cancel(TRANSCRIPT_FAILED)
        self._deliver(event, text)
        if self.checkpoints is not None:
            if event.__class__ is ToolCallFinished:
                assert isinstance(event, ToolCallFinished)
                self.checkpoints.call_finished(event.record)
            elif event.__class__ is IterationFinished:
                assert isinstance(event, IterationFinished)
                self.checkpoints.iteration_finished(event.iteration)

    def _deliver(self, event: RunEvent, text: str | None) -> None:
        if self.observer is not None:
            self.observer.on_event(event, text)
        elif self.buffer is not None:
            self.buffer.append(event)
            if self.wakeup is not None:
                self.wakeup.set()

    async def finish(self, result: RunResult) -> None:
        """``RunFinished``: written, observed, and the result's text kept. A run
        cancelled while the model was streaming ends with the text streamed so far (the
        core's content is the last iteration that ended)."""
        if result.status == "cancelled" and self.streaming:
            result.content = "".join(self.streaming)
        await asyncio.sleep(0)  # the loop's own ending ran in the step before this one
        event = RunFinished(result, run_id=self.run_id)
        params, self.result_text = await self.recorder.finish(event)
        self._deliver(event, params)
        self.finished = True
        await asyncio.sleep(0)  # a face's write of a large result was this step's work


class RunHandle:
    """A run a face started: its events, its result, its cancel."""

    def __init__(self, run: Run) -> None:
        self._run = run

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def registry(self) -> ToolRegistry:
        """The run's own tool layer: tools registered here are this run's alone."""
        return self._run.registry

    @property
    def prompt(self) -> str:
        return self._run.prompt

    @property
    def sandbox_root(self) -> str:
        return self._run.sandbox_root

    @property
    def started_at(self) -> str:
        return self._run.started_at

    @property
    def iterations(self) -> int:
        return self._run.iterations

    @property
    def tool_call_count(self) -> int:
        return self._run.tool_call_count

    @property
    def cancel_token(self) -> CancelToken:
        return self._run.cancel

    @property
    def mcp(self) -> McpServers | None:
        return self._run.mcp

    def done(self) -> bool:
        task = self._run.task
        return task is not None and task.done()

    def cancel(self, reason: str = "cancelled") -> None:
        """Ask the run to stop: the calls in flight are cancelled and recorded, and the
        run ends ``cancelled``. A run already stopping keeps its first reason."""
        self._run.cancel.cancel(reason)

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for the run to end; whether it did."""
        task = self._run.task
        assert task is not None
        done, _ = await asyncio.wait([task], timeout=timeout)
        return bool(done)

    async def result(self) -> RunResult:
        """The outcome, once the run ended (waiting does not cancel it)."""
        task = self._run.task
        assert task is not None
        return await asyncio.shield(task)

    @property
    def result_text(self) -> str | None:
        """The result's JSON text as the transcript recorded it, once the run ended."""
        return self._run.result_text

    async def events(self) -> AsyncIterator[RunEvent]:
        """Every event of the run, from ``RunStarted`` to ``RunFinished``, once. Not
        available for a run whose face observes it (the observer has them)."""
        run = self._run
        buffer = run.buffer
        if buffer is None or run.wakeup is not None:
            raise RuntimeError("events() is read once, and only for a run without an observer")
        run.wakeup = wakeup = asyncio.Event()
        while True:
            while buffer:
                event = buffer.popleft()
                yield event
                if event.__class__ is RunFinished:
                    return
            wakeup.clear()
            await wakeup.wait()

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id}>"
