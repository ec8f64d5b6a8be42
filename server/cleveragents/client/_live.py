"""The live view of ``cleveragents run`` on a terminal, drawn with rich.

A region at the bottom of the screen is redrawn about ten times a second: a spinner
with the iteration, the elapsed time, the tool-call count and the context's use (when
the model's window is known); the model's reasoning (dimmed) and text as they stream,
in the order they came; and the current iteration's tool calls, each row going from
``running`` to ``ok`` or ``failed`` with its duration and a one-line result. When an
iteration ends, its reasoning, text and table are printed above the region for good;
a compaction of the context is a line there too. At the end the region is cleared and
a summary printed: status (the limit that stopped the run, if one did), iterations,
tool calls, duration, tokens, run id and transcript path.

An approval prints the text streamed so far above the region for good, stops the
region, asks (the tool, its arguments, why), and starts it again. A run that ends
before its iteration did (Ctrl-C) keeps the text streamed so far on the screen. rich
is imported here only, so the daemon and the plain views never load it. The console
parses no markup and no emoji codes: model text is shown as text, after ``printable``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from ..protocol import methods as m
from ..runs import Elicitation, ElicitationAnswer
from ..tool import PermissionOutcome
from ._terminal import printable
from ._views import (
    ANSWERS,
    ASK,
    LIMITS,
    Output,
    View,
    compacted_words,
    context_words,
    duration,
    one_line,
    read_line,
    record_line,
    request_lines,
    summary_lines,
)

_STYLES = {"running": "cyan", "ok": "green", "failed": "red"}
_FINAL = {"completed": ("✓ completed", "bold green"), "failed": ("✗ failed", "bold red"),
          "cancelled": ("■ cancelled", "bold yellow"),
          **{words: (f"■ {words}", "bold yellow") for words, _ in LIMITS.values()}}  # fmt: skip
REASONING_STYLE = "dim"
"""How reasoning is set apart from the text (the plain views mark its lines instead)."""


class LiveView(View):
    def __init__(self, out: Output, err: Output | None = None) -> None:
        super().__init__(out, err)
        self.console = Console(
            file=out.stream, highlight=False, markup=False, emoji=False, soft_wrap=False
        )
        self.started = time.monotonic()
        self.iteration = 0
        self.max_iterations = 0
        self.calls = 0
        self.said: list[list[str]] = []
        """The iteration's ``[kind, text]`` pieces not yet printed above the region, in
        the order they came (kind ``text`` or ``reasoning``)."""
        self.streamed = False
        """Whether the model streamed text in this iteration."""
        self.context = ""
        self.rows: dict[str, list[Any]] = {}  # callId -> [status, tool, started, took, result]
        self.status_note = ""
        self.spinner = Spinner("dots", style="cyan")
        """One spinner for the run: made anew at each redraw, it would never turn."""
        self.live = Live(
            get_renderable=self._render, console=self.console, refresh_per_second=10,
            transient=True, redirect_stdout=False, redirect_stderr=False,
        )  # fmt: skip

    def start(self) -> None:
        self.started = time.monotonic()
        self.live.start()

    def stop(self) -> None:
        if self.live.is_started:
            with contextlib.suppress(OSError):  # a terminal that hung up (SIGHUP)
                self.live.stop()

    # -- drawing ---------------------------------------------------------------------

    def _render(self) -> RenderableType:
        head = f"iteration {self.iteration or 1}/{self.max_iterations or '?'}"
        head += f" · {duration((time.monotonic() - self.started) * 1000)}"
        head += f" · {self.calls} tool call{'s' if self.calls != 1 else ''}"
        if self.context:
            head += f" · {self.context}"
        if self.status_note:
            head += f" · {self.status_note}"
        self.spinner.update(text=Text(head, style="bold"))
        parts: list[RenderableType] = [self.spinner]
        if self.said:
            height = max(3, self.console.height - 6 - len(self.rows))
            lines = _tail(self.said, height, self.console.width)
            parts.append(Text("\n").join(Text(line, style=_style(kind)) for kind, line in lines))
        rows = list(self.rows.values())
        if rows:
            parts.append(self._table(rows, live=True))
        return Group(*parts)

    def _table(self, rows: list[list[Any]], live: bool) -> Table:
        table = Table(box=None, show_header=False, padding=(0, 1), expand=False)
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True, style="bold")
        table.add_column(no_wrap=True, justify="right")
        width = max(20, self.console.width - 40)
        table.add_column(no_wrap=True, overflow="ellipsis", max_width=width)
        for status, tool, started, took, result in rows:
            if status == "running" and live:
                took = duration((time.monotonic() - started) * 1000)
            table.add_row(Text(status, style=_STYLES[status]), tool, took, result)
        return table

    # -- what the run sends ----------------------------------------------------------

    def event(self, method: str, params: dict[str, Any]) -> None:
        if method == m.RUN_STARTED:
            self.max_iterations = int(params.get("maxIterations") or 0)
        elif method == m.RUN_MESSAGE_DELTA:
            self.iteration = int(params.get("iteration") or self.iteration)
            self.streamed = True
            self._add("text", printable(str(params.get("text", ""))))
        elif method == m.RUN_REASONING_DELTA:
            self.iteration = int(params.get("iteration") or self.iteration)
            if self.show_reasoning:
                self._add("reasoning", printable(str(params.get("text", ""))))
        elif method == m.RUN_COMPACTED:
            self.console.print(Text(compacted_words(params), style="cyan"))
        elif method == m.RUN_TOOL_CALL_STARTED:
            self.iteration = int(params.get("iteration") or self.iteration)
            self.rows[str(params.get("callId"))] = [
                "running", printable(str(params.get("toolName"))), time.monotonic(), "",
                one_line(params.get("inputs"), 60),
            ]  # fmt: skip
        elif method == m.RUN_TOOL_CALL_PROGRESS:
            row = self.rows.get(str(params.get("callId")))
            if row is not None and row[0] == "running":
                row[4] = progress_words(params)
        elif method == m.RUN_TOOL_CALL:
            record = params.get("record") or {}
            self.calls += 1
            status, tool, took, result = record_line(record)
            self.rows[str(record.get("callId"))] = [status, tool, 0.0, took, result]
        elif method == m.RUN_ITERATION:
            self.iteration = int(params.get("iteration") or self.iteration)
            if not self.streamed:  # a model that did not stream its text
                self._add("text", printable(str(params.get("content") or "")))
            self.context = context_words(params, short=True) or ""
            self._print_so_far()
            self.streamed = False
        if self.live.is_started:
            self.live.refresh()

    def _add(self, kind: str, text: str) -> None:
        if not text:
            return
        if self.said and self.said[-1][0] == kind:
            self.said[-1][1] += text
        else:
            self.said.append([kind, text])

    def _print_said(self) -> None:
        """What the model said and is not printed yet, above the region for good."""
        said, self.said = self.said, []
        for kind, text in said:
            if text.strip():
                self.console.print(Text(text.strip("\n"), style=_style(kind)))

    def _print_so_far(self) -> None:
        """The iteration's reasoning and text not printed yet and its tool calls, above
        the region for good; the region starts afresh."""
        rows, self.rows = list(self.rows.values()), {}
        self._print_said()
        if rows:
            self.console.print(self._table(rows, live=False))

    # -- what the command adds -------------------------------------------------------

    def note(self, text: str) -> None:
        self.status_note = printable(text)
        self.console.print(Text(printable(text), style="yellow"))

    def aside(self, text: str) -> None:
        self.console.print(Text(printable(text), style="cyan"))

    def daemon_line(self, line: str) -> None:
        if sys.stderr.isatty():  # the same terminal: print above the region, not through it
            self.console.print(Text(printable(line.rstrip("\n")), style="dim"))
        else:
            super().daemon_line(line)

    def diff(self, lines: list[str]) -> None:
        for line in lines:
            line = printable(line.rstrip("\n"))
            style = ("green" if line.startswith("+") else "red" if line.startswith("-")
                     else "cyan" if line.startswith("@@") else "")  # fmt: skip
            self.console.print(Text(line, style=style))

    def finish(self, result: dict[str, Any], transcript: Path | None) -> None:
        self.stop()
        self._print_so_far()  # a run cut short (Ctrl-C) keeps what the model had said
        status, details, where = summary_lines(result, transcript)
        label, style = _FINAL.get(status, (status, "bold"))
        first, _, rest = details.partition("\n")
        self.console.print()
        self.console.print(Text.assemble((label, style), " · ", first))
        if rest:
            self.console.print(Text(rest, style="yellow" if status != "failed" else "red"))
        self.console.print(Text(where, style="dim"))

    def changes(self, lines: list[str]) -> None:
        """The diffstat, its graph in git's colours."""
        for line in lines:
            name, bar, graph = line.rpartition(" | ")[0], " | ", line.rpartition(" | ")[2]
            if not name:
                self.console.print(Text(line, style="bold"))
                continue
            count, _, marks = graph.partition(" ")
            plus = len(marks) - len(marks.lstrip("+"))
            minus = len(marks[plus:]) - len(marks[plus:].lstrip("-"))
            self.console.print(Text.assemble(
                name, bar, count, " " if marks else "", (marks[:plus], "green"),
                (marks[plus : plus + minus], "red"), marks[plus + minus :],
            ))  # fmt: skip

    # -- approvals -------------------------------------------------------------------

    def asks_on(self) -> Output:
        return self.out  # the console: the terminal the region is drawn on

    def show_request(self, request: dict[str, Any]) -> None:
        head, *rest = request_lines(request, self.console.width)
        self.console.print(Text(head, style="bold yellow"))
        for line in rest:
            self.console.print(Text(line, style="yellow" if line.startswith("  why") else ""))

    async def ask(self, request: dict[str, Any]) -> PermissionOutcome:
        self.stop()
        try:
            self._print_said()  # what the model said before it asked
            self.show_request(request)
            while True:
                self.console.print(Text(ASK, style="bold"), end="")
                outcome = await self._read_answer()
                if outcome is not None:
                    return outcome
        finally:
            if not self.out.closed:
                self.live.start()

    async def elicit(self, request: Elicitation) -> ElicitationAnswer:
        self.stop()
        try:
            self._print_said()  # what the model said before the server asked
            return await super().elicit(request)
        finally:
            if not self.out.closed:
                self.live.start()

    async def _read_answer(self) -> PermissionOutcome | None:
        self._answer = read_line(self.answer_fd)
        try:
            answer = await self._answer
        finally:
            self._answer = None
        if answer == "\x00eof":
            return "reject_once"
        return ANSWERS.get(answer.strip().lower())


def _style(kind: str) -> str:
    return REASONING_STYLE if kind == "reasoning" else ""


def _tail(said: list[list[str]], lines: int, width: int) -> list[tuple[str, str]]:
    """The last ``lines`` screen lines of what was said, each with its kind (long lines
    wrap at ``width``; each piece starts a line of its own)."""
    out: list[tuple[str, str]] = []
    for kind, text in reversed(said):
        piece: list[tuple[str, str]] = []
        for line in text.strip("\n")[-20_000:].split("\n"):
            chunks = [line[i : i + width] for i in range(0, len(line), width)] or [""]
            piece += [(kind, chunk) for chunk in chunks]
        out[:0] = piece
        if len(out) >= lines:
            break
    return out[-lines:]


def progress_words(params: dict[str, Any]) -> str:
    """A running call's progress from the server's numbers: ``40% indexing`` with a
    total, ``40 indexing`` without; made printable."""
    progress, total = params.get("progress"), params.get("total")
    if not isinstance(progress, int | float):
        return ""
    if isinstance(total, int | float) and total > 0:
        done = f"{min(progress / total, 1.0):.0%}"
    else:
        done = f"{progress:g}"
    message = params.get("message")
    return f"{done} {printable(str(message))}".strip() if message else done
