"""Helpers of the ``cleveragents run`` tests: when a tool's command is running (a FIFO it
writes to), which processes a run left behind, a model on loopback that streams what a
test says (and may then hang), and the screen a pseudo-terminal shows."""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
from pathlib import Path

import pyte

from kit.loopback import LoopbackServer, Reply, data, sse_reply
from kit.processes import processes_with, still_running

__all__ = [
    "BOUND_S",
    "Screen",
    "kill_matching",
    "openai_model",
    "openai_text",
    "processes_with",
    "read_fifo",
    "still_running",
]

BOUND_S = 20.0
"""Bound on every wait for the command under test."""


def read_fifo(path: Path, timeout: float = BOUND_S) -> bytes:
    """Wait (bounded) until a writer puts a line into the FIFO at ``path``; what it wrote.
    A command under test writes to it to say it is running."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        # A non-blocking reader opened before any writer: wait for data, not for a writer.
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"nothing was written to {path} within {timeout} s"
        return os.read(fd, 100)
    finally:
        os.close(fd)


def kill_matching(marker: str) -> None:
    """SIGKILL every process whose command line contains ``marker`` (a test's cleanup)."""
    for pid in processes_with(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# -- a model on loopback -------------------------------------------------------------------


def openai_model(server: LoopbackServer) -> str:
    """``-m`` for an OpenAI-compatible server on loopback (the key: ``OPENAI_API_KEY``,
    any value)."""
    return json.dumps({"provider": "openai", "model": "gpt-test", "baseUrl": f"{server.base_url}/v1",
                       "maxRetries": 0})  # fmt: skip


def openai_text(text: str, *, hang: bool = False) -> Reply:
    """A streamed chat completion of ``text``; with ``hang``, the stream stops there and
    the connection stays open (a model still thinking), until the client leaves."""
    chunk = data({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                  "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                               "finish_reason": None if hang else "stop"}]})  # fmt: skip
    if hang:
        return sse_reply(chunk, hang=True)
    return sse_reply(chunk, "data: [DONE]\n\n")


# -- the screen of a pseudo-terminal -------------------------------------------------------


class Screen:
    """What a terminal of ``columns`` x ``lines`` shows, fed the raw output of a command
    on a pseudo-terminal (pexpect's ``logfile_read``)."""

    def __init__(self, columns: int = 80, lines: int = 40) -> None:
        self.raw = io.StringIO()
        self._screen = pyte.Screen(columns, lines)
        self._stream = pyte.Stream(self._screen)
        self._fed = 0

    def write(self, text: str) -> None:  # pexpect's logfile_read
        self.raw.write(text)

    def flush(self) -> None:
        pass

    def lines(self) -> list[str]:
        """The screen's lines now, trailing blanks cut (blank lines at the end left out)."""
        text = self.raw.getvalue()
        self._stream.feed(text[self._fed :])
        self._fed = len(text)
        shown = [line.rstrip() for line in self._screen.display]
        while shown and not shown[-1]:
            shown.pop()
        return shown
