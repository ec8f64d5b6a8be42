"""How ``cleveragents run`` (and the demo) show a run: the plain and JSON views, and the
pieces the live view shares with them.

A view receives each notification (``event``, its params parsed; or ``event_text``,
its params' JSON text as the run service made it for the daemon's notification and the
transcript), notes from the command (``note``: a cancel under way, a refusal, a log
line), answers approvals (``ask``) when the terminal can, and ends with
``finish(result)``: the summary. Three views:

- ``JsonView`` (``--json``): each notification as one ``{"method", "params"}`` line and
  nothing else on stdout; from ``event_text``, the transcript's own line (the params'
  text as it is);
- ``PlainView`` (off a terminal, or with ``NO_COLOR``): plain, stable lines;
- ``LiveView`` (``_live``, on a terminal): a redrawn region with rich.

Everything a model or a tool controls goes through ``_terminal.printable`` (or
``json_text``) before it is written. A closed stdout (``| head``) is noticed once, later
writes are dropped, and ``on_closed`` is told, so the command can stop the run quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ..protocol import methods as m
from ..tool import PermissionOutcome
from ._terminal import json_text, printable

ASK = "allow? [y]es / [n]o / [a]lways "
_RAW_IN_JSON_TEXT = re.compile(r"[\x7f-\x9f\ud800-\udfff]")
"""What the params' JSON text may hold raw, inside its strings only: DEL and the C1
controls (a terminal may act on them) and lone surrogates (not UTF-8)."""
ANSWERS: dict[str, PermissionOutcome] = {
    "y": "allow_once", "yes": "allow_once", "a": "allow_always", "always": "allow_always",
    "n": "reject_once", "no": "reject_once", "": "reject_once",
}  # fmt: skip


def duration(ms: float) -> str:
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def one_line(value: Any, width: int = 60) -> str:
    """A short, printable, single-line form of a tool's inputs or output."""
    if isinstance(value, str):
        text = next((line for line in value.splitlines() if line.strip()), "")
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = printable(text).replace("\t", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def record_line(record: dict[str, Any]) -> tuple[str, str, str, str]:
    """``(status, tool, duration, result)`` of a ``ToolCallRecord``, printable."""
    status = "ok" if record.get("success") else "failed"
    result = record.get("output") if record.get("success") else record.get("error") or ""
    return (status, printable(str(record.get("toolName", ""))),
            duration(float(record.get("durationMs") or 0)), one_line(result))  # fmt: skip


def summary_lines(result: dict[str, Any], transcript: Path | None) -> tuple[str, str, str]:
    """``(status word, details, where)`` of a finished run, printable."""
    status = str(result.get("status"))
    records = result.get("toolCallHistory") or []
    failed = sum(1 for r in records if not r.get("success"))
    count = len(records) + int(result.get("omittedRecords") or 0)
    parts = [
        f"{result.get('iterations', 0)} iteration{'s' if result.get('iterations') != 1 else ''}",
        f"{count} tool call{'s' if count != 1 else ''}" + (f" ({failed} failed)" if failed else ""),
        duration(float(result.get("durationMs") or 0)),
    ]
    usage = result.get("usage")
    if isinstance(usage, dict):
        tokens_in, tokens_out = usage.get("inputTokens", 0), usage.get("outputTokens", 0)
        parts.append(f"{tokens_in:,} tokens in / {tokens_out:,} out")
    details = " · ".join(parts)
    error = result.get("error")
    if status == "limit":
        details += (
            f"\nthe model was still working when the limit stopped it: the text above is "
            f"not an answer. Raise --max-iterations, or go on with: cleveragents run "
            f"--continue {result.get('runId')} PROMPT"
        )
    elif isinstance(error, dict) and error.get("message"):
        details += f"\n{error['message']}"
    where = f"run {result.get('runId')}"
    if transcript is not None:
        where += f" · transcript {transcript}"
    return (
        {"limit": "stopped at the iteration limit"}.get(status, status),
        printable(details),
        printable(where),
    )


class Output:
    """Writes to a stream; a closed pipe (or a hung-up terminal) is noticed once and every
    later write dropped."""

    def __init__(self, stream: TextIO, on_closed: Callable[[], None] | None = None) -> None:
        self.stream = stream
        self.closed = False
        self.on_closed = on_closed

    def write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError as exc:
            # A closed pipe, or a terminal hung up (EIO): nobody reads any more.
            if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EIO:
                raise
            self.closed = True
            # Python flushes stdout again at exit; point it at /dev/null so that is quiet.
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.stream.fileno())
                os.close(devnull)
            if self.on_closed is not None:
                self.on_closed()


class View:
    """The plain view; the JSON and live views override what they show differently."""

    def __init__(self, out: Output, err: Output | None = None) -> None:
        self.out = out
        self.err = err or Output(sys.stderr)
        self._answer: asyncio.Future[str] | None = None
        self._at_line_start = True
        self._streamed: set[int] = set()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Called once the daemon is up, before the run starts."""

    def stop(self) -> None:
        """Give the terminal back (idempotent); called on every way out."""

    # -- what the run sends ----------------------------------------------------------

    def event_text(self, method: str, text: str) -> None:
        """One notification, its params as JSON text: what ``event`` would be given,
        parsed from the very text a daemon would have sent."""
        self.event(method, json.loads(text))

    def event(self, method: str, params: dict[str, Any]) -> None:
        if method == m.RUN_STARTED:
            self._line(
                f"run {params.get('runId')} in {params.get('sandboxRoot')}: up to "
                f"{params.get('maxIterations')} iterations, {len(params.get('tools') or [])} tools"
            )
        elif method == m.RUN_MESSAGE_DELTA:
            text = printable(str(params.get("text", "")))
            if text:
                self._streamed.add(int(params.get("iteration") or 0))
                self.out.write(text)
                self._at_line_start = text.endswith("\n")
        elif method == m.RUN_TOOL_CALL_STARTED:
            self._line(
                f"  started {printable(str(params.get('toolName')))} "
                f"{one_line(params.get('inputs'), 80)}"
            )
        elif method == m.RUN_TOOL_CALL:
            status, tool, took, result = record_line(params.get("record") or {})
            self._line(f"  {status:<7} {tool} {took}: {result}")
        elif method == m.RUN_ITERATION:
            iteration = int(params.get("iteration") or 0)
            content = printable(str(params.get("content") or ""))
            if iteration not in self._streamed and content:
                self._line(content)  # a model that did not stream its text

    def _line(self, text: str) -> None:
        text = printable(text)  # callers clean model text already; paths and ids too
        if not self._at_line_start:
            text = "\n" + text
        self.out.write(text + "\n")
        self._at_line_start = True

    # -- what the command adds -------------------------------------------------------

    def note(self, text: str) -> None:
        """One line from the command (not from the model): on stderr."""
        self.err.write(printable(text) + "\n")

    def aside(self, text: str) -> None:
        """A line shown with the run (the demo's editor), not from the model."""
        self._line(printable(text))

    def daemon_line(self, line: str) -> None:
        """A log line: the spawned daemon's stderr (the demo), or the in-process run
        service's log (``cleveragents run``)."""
        self.err.write(printable(line.rstrip("\n")) + "\n")

    def diff(self, lines: list[str]) -> None:
        """A unified diff (the demo's edit)."""
        for line in lines:
            self._line(printable(line.rstrip("\n")))

    def finish(self, result: dict[str, Any], transcript: Path | None) -> None:
        status, details, where = summary_lines(result, transcript)
        self._line("")
        self._line(f"{status}: {details}")
        self._line(where)

    # -- approvals -------------------------------------------------------------------

    def show_request(self, request: dict[str, Any]) -> None:
        self.err.write(printable(_request_text(request)) + "\n")

    async def ask(self, request: dict[str, Any]) -> PermissionOutcome:
        """Ask at the terminal; ``reject_once`` on end of input or when interrupted."""
        self.show_request(request)
        while True:
            self.err.write(ASK)
            self._answer = read_line()
            try:
                answer = await self._answer
            finally:
                self._answer = None
            outcome = ANSWERS.get(answer.strip().lower())
            if outcome is not None or answer == "\x00eof":
                return outcome or "reject_once"

    def interrupt_ask(self) -> None:
        """A pending question is answered ``no`` (Ctrl-C while asking)."""
        if self._answer is not None and not self._answer.done():
            self._answer.set_result("")


class JsonView(View):
    """``--json``: stdout holds only the notifications, one per line, as received."""

    def event_text(self, method: str, text: str) -> None:
        """The transcript's line for this notification, byte for byte, but for what a
        terminal could act on or UTF-8 cannot hold (``_RAW_IN_JSON_TEXT``), escaped:
        the same JSON."""
        text = _RAW_IN_JSON_TEXT.sub(_escaped, text)
        self.out.write(f'{{"method":{json.dumps(method)},"params":{text}}}\n')

    def event(self, method: str, params: dict[str, Any]) -> None:
        self.out.write(json_text({"method": method, "params": params}) + "\n")

    def aside(self, text: str) -> None:
        self.note(text)

    def finish(self, result: dict[str, Any], transcript: Path | None) -> None:
        error = result.get("error")
        if isinstance(error, dict) and error.get("message"):
            self.note(f"{result.get('status')}: {error['message']}")


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _request_text(request: dict[str, Any]) -> str:
    return (
        f"{request.get('toolName')} asks to run\n"
        f"  inputs: {one_line(request.get('inputs'), 400)}\n"
        f"  why:    {request.get('reason')}"
    )


def read_line() -> asyncio.Future[str]:
    """The next line of stdin, read on the event loop (a thread blocked in ``input()``
    could not be stopped by Ctrl-C); ``"\\x00eof"`` at end of input."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()
    fd = sys.stdin.fileno()
    buffer = bytearray()

    def readable() -> None:
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        buffer.extend(data)
        if not future.done() and (not data or b"\n" in buffer):
            text = buffer.split(b"\n", 1)[0].decode("utf-8", "replace")
            future.set_result(text if data or buffer else "\x00eof")

    loop.add_reader(fd, readable)
    future.add_done_callback(lambda _: loop.remove_reader(fd))
    return future
