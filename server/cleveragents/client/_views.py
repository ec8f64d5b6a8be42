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
- ``AnswerView`` (stdout off a terminal): the final answer alone on stdout, at the end;
  the plain lines (progress, the text of iterations that called tools, the summary) on
  stderr;
- ``View`` (on a terminal with ``NO_COLOR``): plain, stable lines on stdout;
- ``LiveView`` (``_live``, on a terminal): a redrawn region with rich.

The model's reasoning (``run/reasoningDelta``) is shown before the text it preceded,
set apart: dimmed in the live view, and in the plain views on stderr with each line
marked ``┆`` (never on stdout off a terminal, where the answer is alone);
``show_reasoning = False`` (``--no-reasoning``) hides it. A compaction of the context
is one line; the context's use, when the model's window is known, is a percentage (the
live view's status line, a plain line per iteration).

An approval shows the text the model streamed so far first, then the tool and its
arguments (not the reserved ``sandbox_root`` and ``resource_bindings``: the reason says
when the model's own were replaced), each line cut to the terminal's width, then asks.

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
import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ..protocol import methods as m
from ..runs import Elicitation, ElicitationAnswer
from ..tool import RESERVED_INPUT_KEYS, PermissionOutcome
from ._terminal import json_text, printable

ASK = "allow? [y]es / [n]o / [a]lways "
REASONING_MARK = "┆ "
"""Starts each line of reasoning in the plain views (the live view dims it instead)."""
_RAW_IN_JSON_TEXT = re.compile(r"[\x7f-\x9f\ud800-\udfff]")
"""What the params' JSON text may hold raw, inside its strings only: DEL and the C1
controls (a terminal may act on them) and lone surrogates (not UTF-8)."""
ANSWERS: dict[str, PermissionOutcome] = {
    "y": "allow_once", "yes": "allow_once", "a": "allow_always", "always": "allow_always",
    "n": "reject_once", "no": "reject_once", "": "reject_once",
}  # fmt: skip


def duration(ms: float) -> str:
    """A duration for people: ``7.3 ms``, ``736 ms``, ``1.5 s``, ``2 min 5 s``."""
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


LIMITS: dict[str, tuple[str, str]] = {
    "iterations": ("stopped at the iteration limit", "Raise --max-iterations"),
    "toolCalls": ("stopped at the tool-call limit", "Raise --max-tool-calls"),
    "deadline": ("stopped at the deadline", "Give it longer with --deadline"),
    "tokens": ("stopped at the token limit", "Raise --max-tokens"),
}
"""What the summary says of each ``limitReason``: the status, and the flag that moves it."""


def limit_words(result: dict[str, Any]) -> tuple[str, str]:
    """``(status words, advice)`` for a run that ended at a limit (``limitReason``; a
    result from before there were other limits ended at the iteration limit)."""
    return LIMITS.get(str(result.get("limitReason") or "iterations"), LIMITS["iterations"])


def summary_lines(result: dict[str, Any], transcript: Path | None) -> tuple[str, str, str]:
    """``(status words, details, where)`` of a finished run, printable."""
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
    words = status
    if status == "limit":
        words, advice = limit_words(result)
        details += (
            f"\nthe model was still working when the limit stopped it: the text above is "
            f"not an answer. {advice}, or go on with: cleveragents run "
            f"--continue {result.get('runId')} PROMPT"
        )
    elif isinstance(error, dict) and error.get("message"):
        details += f"\n{error['message']}"
    where = f"run {result.get('runId')}"
    if transcript is not None:
        where += f" · transcript {transcript}"
    return words, printable(details), printable(where)


def context_words(params: dict[str, Any], *, short: bool = False) -> str | None:
    """``context 79% (1,577 / 2,000 tokens)`` (``short``: ``context 79%``) from
    ``run/iteration``'s estimate and window; ``None`` when the window is not known."""
    tokens, window = params.get("contextTokens"), params.get("contextWindow")
    if not isinstance(tokens, int) or not isinstance(window, int) or window < 1:
        return None
    words = f"context {round(100 * tokens / window)}%"
    return words if short else f"{words} ({tokens:,} / {window:,} tokens)"


def compacted_words(params: dict[str, Any]) -> str:
    """One line for ``run/compacted``: how, and the context's size before and after."""
    how = {"prune": "old tool outputs pruned", "summary": "earlier turns summarised"}.get(
        str(params.get("strategy")), printable(str(params.get("strategy")))
    )
    removed = int(params.get("messagesRemoved") or 0)
    line = (f"context compacted ({how}): {int(params.get('tokensBefore') or 0):,} → "
            f"{int(params.get('tokensAfter') or 0):,} tokens")  # fmt: skip
    if removed:
        line += f", {removed} message{'s' if removed != 1 else ''} removed"
    return line


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
            self.reader_gone()

    def reader_gone(self) -> None:
        """Nobody reads any more (noticed by a write, or by watching the pipe): later
        writes are dropped and ``on_closed`` is told, once."""
        if self.closed:
            return
        self.closed = True
        quiet(self.stream)
        if self.on_closed is not None:
            self.on_closed()

    def isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (OSError, ValueError):
            return False


def quiet(stream: TextIO) -> None:
    """Point a stream nobody reads at /dev/null: Python flushes stdout again at exit,
    and that flush must not fail with a traceback."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


class View:
    """The plain view; the answer, JSON and live views override what they show
    differently."""

    def __init__(self, out: Output, err: Output | None = None) -> None:
        self.out = out
        self.err = err or Output(sys.stderr)
        self.answer_fd: int | None = None
        """Where answers to approvals are read (default: stdin)."""
        self.question: Output | None = None
        """Where approvals are asked (default: the view's own stream for them)."""
        self._answer: asyncio.Future[str] | None = None
        self._at_line_start = True
        self._streamed: set[int] = set()
        self.show_reasoning = True
        """Whether the model's reasoning is shown (``--no-reasoning`` hides it)."""
        self._reasoning_open = False  # a line of reasoning is written and not ended
        self._interrupted_with = ""
        """What Ctrl-C answers a pending question: no, or end of input (cancel)."""

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Called once the daemon is up, before the run starts."""

    def stop(self) -> None:
        """Give the terminal back (idempotent); called on every way out."""

    def use_terminal(self, fd: int, question: Output | None) -> None:
        """Ask approvals on this terminal: answers read from ``fd``; questions written
        to ``question`` (``None``: where the view writes them anyway)."""
        self.answer_fd = fd
        self.question = question

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
                self._text(text)
        elif method == m.RUN_REASONING_DELTA:
            text = printable(str(params.get("text", "")))
            if text and self.show_reasoning:
                self._reasoning(text)
        elif method == m.RUN_COMPACTED:
            self._line(f"  {compacted_words(params)}")
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
            context = context_words(params)
            if context is not None:
                self._line(f"  {context}")

    def _reasoning(self, text: str) -> None:
        """Streamed reasoning, already printable: on stderr (never mixed into an answer
        on stdout), each line marked, after the line of text it interrupts is ended."""
        self._end_line()
        pieces = []
        for piece in text.splitlines(keepends=True):
            if not self._reasoning_open:
                pieces.append(REASONING_MARK)
            pieces.append(piece)
            self._reasoning_open = not piece.endswith("\n")
        self.err.write("".join(pieces))

    def _end_reasoning(self) -> None:
        """End a line of reasoning before anything else is written (the same terminal)."""
        if self._reasoning_open:
            self.err.write("\n")
            self._reasoning_open = False

    def _text(self, text: str) -> None:
        """Streamed model text, already printable."""
        self._end_reasoning()
        self.out.write(text)
        self._at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        self._end_reasoning()
        text = printable(text)  # callers clean model text already; paths and ids too
        if not self._at_line_start:
            text = "\n" + text
        self.out.write(text + "\n")
        self._at_line_start = True

    # -- what the command adds -------------------------------------------------------

    def note(self, text: str) -> None:
        """One line from the command (not from the model): on stderr."""
        self._end_reasoning()
        self._end_line()
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

    def changes(self, lines: list[str]) -> None:
        """The diffstat of what the run changed (printable lines), after the summary:
        on stdout on a terminal, on stderr off one (the answer view's own stream)."""
        for line in lines:
            self._line(line)

    def _end_line(self) -> None:
        """End a line of streamed text before a line of another stream starts (both may
        be the same terminal)."""
        if not self._at_line_start:
            self.out.write("\n")
            self._at_line_start = True

    # -- approvals -------------------------------------------------------------------

    def asks_on(self) -> Output:
        """Where approvals are asked."""
        return self.question or self.err

    def show_request(self, request: dict[str, Any]) -> None:
        self._end_line()
        out = self.asks_on()
        out.write("\n".join(request_lines(request, terminal_width(out))) + "\n")

    async def ask(self, request: dict[str, Any]) -> PermissionOutcome:
        """Ask at the terminal; ``reject_once`` on end of input or when interrupted."""
        self.show_request(request)
        while True:
            self.asks_on().write(ASK)
            self._answer = read_line(self.answer_fd)
            try:
                answer = await self._answer
            finally:
                self._answer = None
            outcome = ANSWERS.get(answer.strip().lower())
            if outcome is not None or answer == "\x00eof":
                return outcome or "reject_once"

    def interrupt_ask(self) -> None:
        """A pending question is answered ``no`` (Ctrl-C while asking); an MCP server's
        question is cancelled."""
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(self._interrupted_with)

    async def elicit(self, request: Elicitation) -> ElicitationAnswer:
        """Ask an MCP server's question at the terminal (see ``_elicit``)."""
        from ._elicit import EOF, ask_elicitation
        from ._terminal import open_in_browser

        self._end_line()

        def read() -> asyncio.Future[str]:
            self._answer = read_line(self.answer_fd)
            return self._answer

        self._interrupted_with = EOF
        try:
            return await ask_elicitation(request, self.asks_on().write, read, open_in_browser)
        finally:
            self._answer = None
            self._interrupted_with = ""


class AnswerView(View):
    """Stdout off a terminal (``> out.txt``, ``| next-command``): the final answer alone
    on stdout, written when the run ends; everything else as the plain view's lines on
    stderr. The text of an iteration that calls tools is shown on stderr when its calls
    start (and on the terminal approvals are asked on, before the question); the last
    iteration's text is the answer."""

    def __init__(self, answer: Output, err: Output | None = None) -> None:
        err = err or Output(sys.stderr)
        super().__init__(err, err)
        self.answer = answer
        self._said = ""  # the iteration's text so far
        self._flushed = 0  # how much of it is on stderr
        self._asked_after = False  # whether the question's terminal has been shown it

    def _text(self, text: str) -> None:
        self._said += text

    def _flush_said(self) -> None:
        if len(self._said) > self._flushed:
            super()._text(self._said[self._flushed :])
            self._flushed = len(self._said)

    def event(self, method: str, params: dict[str, Any]) -> None:
        if method == m.RUN_TOOL_CALL_STARTED:
            self._flush_said()  # the text the model wrote before its calls
        if method != m.RUN_ITERATION:
            super().event(method, params)
            return
        if params.get("toolCallCount"):
            self._flush_said()
            super().event(method, params)  # the text of a model that did not stream
        else:  # its text is the answer, for stdout at the end
            context = context_words(params)
            if context is not None:
                self._line(f"  {context}")
        self._said, self._flushed, self._asked_after = "", 0, False

    def show_request(self, request: dict[str, Any]) -> None:
        self._flush_said()
        if self.question is not None and self._said.strip() and not self._asked_after:
            self.question.write(self._said.rstrip("\n") + "\n")  # asked on /dev/tty
            self._asked_after = True
        super().show_request(request)

    def finish(self, result: dict[str, Any], transcript: Path | None) -> None:
        super().finish(result, transcript)
        content = printable(str(result.get("content") or ""))
        if content:
            self.answer.write(content if content.endswith("\n") else content + "\n")


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

    def changes(self, lines: list[str]) -> None:
        """Nothing: stdout holds the notifications alone (``run/diff`` has the diff)."""


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


MAX_VALUE_LINES = 8
"""An argument's value is shown in at most this many screen lines."""


def terminal_width(out: Output | None = None) -> int:
    """The width to cut lines to: the terminal's, else 100 columns."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if out is not None and out.isatty():
            return os.get_terminal_size(out.stream.fileno()).columns
    return shutil.get_terminal_size((100, 24)).columns


def request_lines(request: dict[str, Any], width: int = 100) -> list[str]:
    """A call the profile asks about, for people: the tool, then each argument the model
    gave (the reserved keys left out: the run sets those), then why it asks. Every
    line is printable and shorter than ``width`` columns, so the terminal never wraps
    it."""
    width = max(width, 40) - 1
    lines = [_cut(f"? {printable(str(request.get('toolName')))} wants to run", width)]
    inputs = request.get("inputs")
    shown = {k: v for k, v in inputs.items() if k not in RESERVED_INPUT_KEYS} if isinstance(
        inputs, dict) else {}  # fmt: skip
    if not shown:
        lines.append("    (no arguments)")
    for key, value in shown.items():
        lines += _argument_lines(printable(str(key)), value, width)
    reason = textwrap.wrap(printable(str(request.get("reason"))), width - 8) or [""]
    lines += [f"  why: {reason[0]}", *(f"       {more}" for more in reason[1:])]
    return lines


def _argument_lines(key: str, value: Any, width: int) -> list[str]:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = printable(text).replace("\t", "    ").rstrip("\n")
    head = f"    {key}: "
    room = max(20, width - 6)
    screen: list[str] = []
    for line in text.split("\n"):
        screen += textwrap.wrap(line, room, replace_whitespace=False) or [""]
    more = len(screen) - MAX_VALUE_LINES
    if more > 0:
        screen = [*screen[:MAX_VALUE_LINES], f"… {more} more line{'s' if more != 1 else ''}"]
    if len(screen) == 1 and len(head) + len(screen[0]) <= width:
        return [head + screen[0]]
    return [head.rstrip(), *(_cut("      " + line, width) for line in screen)]


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def read_line(fd: int | None = None) -> asyncio.Future[str]:
    """The next line of ``fd`` (default stdin), read on the event loop (a thread blocked
    in ``input()`` could not be stopped by Ctrl-C); ``"\\x00eof"`` at end of input."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()
    fd = sys.stdin.fileno() if fd is None else fd
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
