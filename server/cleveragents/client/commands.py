"""``cleveragents run``: one run of the run service, in this process, shown as it happens.

The command line (``cli``) resolves the arguments into :class:`RunOptions`; this module
builds the run service (the built-in tools, the state dir, the workspace), starts the run
and shows it through a view (``_views``, ``_live``). The terminal is one more face of the
service: no daemon is spawned, and neither pygls nor lsprotocol is loaded. Each event's
text is its notification's params exactly as the daemon would send them and as the
transcript records them, so the views see what they saw from a daemon, byte for byte.
It owns the run's interaction with the person at the terminal:

- approvals: ``--yes`` allows what the profile would ask; otherwise the view asks on
  the terminal: stdin when it is one (and not where the prompt came from), else
  ``/dev/tty``; with no terminal at all, the call is refused as not approved (not as a
  user's decision) and one line names ``--yes`` and ``--profile``;
- Ctrl-C: the first cancels the run, which ends as ``cancelled`` (the shell tool kills
  its command's process group; with ``--json``, ``run/finished`` is still printed); a
  second exits at once;
- a closed stdout (``| head``): the run is cancelled quietly and the exit code is 141,
  as for a process killed by SIGPIPE (a pipe is watched, so this is noticed even when
  nothing is written to it before the answer);
- ``-o FILE``: the answer (the result's ``content``) is written to FILE at the end;
- SIGTERM, SIGHUP (a closed terminal): the run is cancelled and recorded, as a daemon
  does for its runs, and the exit code is 143 or 129: the tools' commands run in
  sessions of their own, and would outlive a command that just died.

Exit codes (docs/cli.md, "Ctrl-C and exit codes"): 0 completed, 1 failed or a limit,
130 cancelled, 2 usage error (a run the service refused before it existed included), 3
``--fork --restore-files`` refused by the files (conflicts: nothing changed). A run that
took checkpoints ends with a diffstat of what it changed (not with ``--json``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import select
import signal
import stat
import sys
import uuid
from pathlib import Path
from typing import Any, TextIO

import attrs

from .._mcp_login import open_sign_in
from ..checkpoints import CheckpointError, DiffResult
from ..llm import log_scrubber
from ..protocol import RUN_EVENTS
from ..runs import (
    Elicitation,
    ElicitationAnswer,
    ForkFrom,
    McpClientSide,
    PermissionPrompt,
    RunHandle,
    RunRequest,
    RunRequestError,
    RunService,
    RunSettings,
    prepare_process,
)
from ..tool import (
    Checkpointed,
    CleverAgentsError,
    PermissionOutcome,
    PermissionQuery,
    RunEvent,
    ToolSpec,
    UsageLimits,
)
from ..workspace import ShellTool, builtin_tools
from ..workspace.profiles import NotAsked
from ._changes import EXIT_CONFLICTS, stat_lines
from ._terminal import printable
from ._views import AnswerView, JsonView, Output, View, terminal_width

EXIT_CODES = {"completed": 0, "failed": 1, "limit": 1, "cancelled": 130}
EXIT_USAGE = 2
EXIT_CLOSED = 141
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that cancel the run, then exit with 128 + the signal's number."""

NOT_ASKED = "not approved: no terminal to ask (use --yes or --profile)"
"""Why a call the profile asks about was refused when nobody could be asked."""
CANCEL_REASON = "cancelled at the terminal"
"""The run's cancel reason (not a signal's name: the result then carries no error, as
for a ``run/cancel``)."""

_METHOD: dict[type, str] = {event: method.name for event, method in RUN_EVENTS.items()}

# A refused request speaks of flags: RunRequest fields (RunRequestError.field) ...
_FIELD_FLAGS = {
    "max_iterations": "--max-iterations", "system_prompt": "--system",
    "automation_profile": "--profile", "continue_from": "--continue",
    "sandbox_root": "--workspace", "model": "--model", "prompt": "the prompt",
    "limits": "--max-tool-calls, --deadline or --max-tokens", "fork_from": "--fork",
}  # fmt: skip
# ... and RunParams fields, as other errors' messages may name them.
_FLAG_NAMES = [
    (re.compile(r"\b(?:params\.)?maxIterations\b"), "--max-iterations"),
    (re.compile(r"\b(?:params\.)?systemPrompt\b"), "--system"),
    (re.compile(r"\b(?:params\.)?automationProfile\b"), "--profile"),
    (re.compile(r"\b(?:params\.)?continueFrom\b"), "--continue"),
    (re.compile(r"\b(?:params\.)?sandboxRoot\b"), "--workspace"),
    (re.compile(r"\bparams\.model\b"), "--model"),
    (re.compile(r"\bparams\.prompt\b"), "the prompt"),
    (re.compile(r"\b(?:params\.)?(?:forkFrom\.)?restoreFiles\b"), "--restore-files"),
    (re.compile(r"\b(?:params\.)?forkFrom\b"), "--fork"),
]


@attrs.define
class RunOptions:
    """What ``cleveragents run`` was asked, resolved (flags, environment, config)."""

    prompt: str
    workspace: Path
    state_dir: Path
    model: str | dict[str, Any]
    profile: str
    system: str | None = None
    """``--system``: added after the default instructions."""
    instructions: bool = True
    """The default system prompt and the workspace's AGENTS.md (``--no-instructions``:
    neither)."""
    max_iterations: int | None = None
    yes: bool = False
    json: bool = False
    continue_from: str | None = None
    stdin_taken: bool = False
    """Whether stdin was read for the prompt (approvals are then asked on /dev/tty)."""
    output_file: Path | None = None
    """``-o``: where the answer is written at the end."""
    reasoning: bool = True
    """Whether the model's reasoning is shown (``--no-reasoning``: not)."""
    limits: UsageLimits | None = None
    """``--max-tool-calls``, ``--deadline``, ``--max-tokens``."""
    mcp_servers: tuple[Any, ...] = ()
    """The MCP servers the run starts (``McpServerConfig``: ``--mcp``, ``--mcp-config``,
    ``config.toml``, the workspace's approved ``.mcp.json``)."""
    checkpoints: bool = True
    """Whether the run snapshots the files it changes (``--no-checkpoints``: not)."""
    fork_from: ForkFrom | None = None
    """``--fork RUN_ID[@K]`` (and ``--restore-files``)."""


def flag_words(message: str) -> str:
    for pattern, flag in _FLAG_NAMES:
        message = pattern.sub(flag, message)
    return message


def refusal_text(exc: CleverAgentsError) -> str:
    """Why the service refused the run, in the words of the command line."""
    if isinstance(exc, RunRequestError):
        return f"{_FIELD_FLAGS.get(exc.field, exc.field)}: {exc.problem}"
    return flag_words(exc.message)


def make_view(options: RunOptions, out: Output) -> View:
    """The view for this run's stdout (``out``): JSON lines, the answer alone (off a
    terminal), the live view, or plain lines (a terminal with ``NO_COLOR``)."""
    view: View
    if options.json:
        return JsonView(out)  # the notifications as they are, reasoning included
    if not out.isatty():
        view = AnswerView(out)
    elif not os.environ.get("NO_COLOR"):
        from ._live import LiveView

        view = LiveView(out)
    else:
        view = View(out)
    view.show_reasoning = options.reasoning
    return view


class Terminal:
    """Where approvals are asked: stdin when it is a terminal the prompt did not come
    from, else the process's controlling terminal (``/dev/tty``); none without either."""

    def __init__(self, fd: int, owned: bool) -> None:
        self.fd = fd
        self.owned = owned
        self._writer: TextIO | None = None

    @classmethod
    def find(cls, stdin_taken: bool) -> Terminal | None:
        stdin = sys.stdin
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if not stdin_taken and stdin is not None and stdin.isatty():
                return cls(stdin.fileno(), owned=False)
        try:
            return cls(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY), owned=True)
        except OSError:  # no controlling terminal (a service, CI, setsid)
            return None

    def writer(self) -> Output | None:
        """The terminal for writing (questions, when the view's own stream for them is
        not a terminal); ``None`` when it cannot be opened for writing."""
        try:
            fd = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY)
        except OSError:
            return None
        self._writer = open(fd, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        return Output(self._writer)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._writer is not None:
                self._writer.close()
            if self.owned:
                os.close(self.fd)


def watch_pipe(stream: TextIO, output: Output) -> None:
    """Notice at once when the reader of a pipe goes away (``| head`` that exited), even
    while nothing is being written to it (the answer view writes only at the end)."""
    try:
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
    except (OSError, ValueError, AttributeError):
        return
    loop = asyncio.get_running_loop()
    poller = select.poll()
    poller.register(fd, select.POLLERR | select.POLLHUP)

    def check() -> None:
        # epoll reports an error on the write end of a pipe whose reader closed it.
        if any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
            loop.remove_reader(fd)
            output.reader_gone()

    with contextlib.suppress(OSError, ValueError, NotImplementedError):
        loop.add_reader(fd, check)


def permission_request(run_id: str, query: PermissionQuery, reason: str) -> dict[str, Any]:
    """A call the profile asks about, as ``permission/request`` params (what the views
    show): the inputs the tool will really receive, and the reason saying when the
    model's own reserved values were replaced."""
    shown = PermissionPrompt.of(query, reason)
    return {"runId": run_id, "callId": shown.call_id, "toolName": shown.tool_name,
            "inputs": shown.inputs, "reason": shown.reason}  # fmt: skip


class _Session:
    """One run's face: the service's observer, the signal handler and the approvals."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.run_id = uuid.uuid4().hex
        self.handle: RunHandle | None = None
        self.cancelling = False
        self.closed_pipe = False
        self.stopped_by: int | None = None
        self.interrupts = 0
        self.always: set[str] = set()  # tools answered [a]lways: not asked again this run
        self.asking = asyncio.Lock()  # one question at a time (calls may ask at once)
        self.checkpointed = False
        """Whether the run took a checkpoint (it then ends with a diffstat)."""
        self.stdout = Output(sys.stdout, self.on_closed)
        self.view = make_view(options, self.stdout)
        self.terminal = None if options.yes else Terminal.find(options.stdin_taken)
        if self.terminal is not None:
            question = None if self.view.asks_on().isatty() else self.terminal.writer()
            self.view.use_terminal(self.terminal.fd, question)

    def on_event(self, event: RunEvent, text: str | None, /) -> None:
        if isinstance(event, Checkpointed):
            self.checkpointed = True
        if text is not None:  # None: an event no notification carries
            self.view.event_text(_METHOD[event.__class__], text)

    def attach(self, handle: RunHandle) -> None:
        """The run exists: a cancel asked for while it was being started applies now."""
        self.handle = handle
        if self.cancelling:
            handle.cancel(CANCEL_REASON)

    def on_sigint(self) -> None:
        self.interrupts += 1
        if self.interrupts > 1:
            self.view.stop()
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            os._exit(EXIT_CODES["cancelled"])
        self.view.note("cancelling the run (Ctrl-C again to quit at once)")
        self.cancel()

    def on_stop_signal(self, signum: int) -> None:
        if self.stopped_by is None:
            self.view.note(f"{signal.Signals(signum).name}: cancelling the run")
        self.stopped_by = signum
        self.cancel()

    def on_closed(self) -> None:
        self.closed_pipe = True
        self.cancel()

    def exit_code(self, status: str | None) -> int:
        """The command's exit code once the run ended with ``status``."""
        if self.stopped_by is not None:
            return 128 + self.stopped_by
        if self.closed_pipe:
            return EXIT_CLOSED
        return EXIT_CODES.get(str(status), 1)

    def cancel(self) -> None:
        if self.cancelling:
            return
        self.cancelling = True
        self.view.interrupt_ask()
        if self.handle is not None:
            self.handle.cancel(CANCEL_REASON)

    async def ask(self, query: PermissionQuery, reason: str) -> PermissionOutcome | str:
        """The run's ``ask``, for a call its profile asks about."""
        if self.options.yes:
            return "allow_once"
        if self.cancelling:
            return "reject_once"
        request = permission_request(self.run_id, query, reason)
        if self.terminal is not None:
            async with self.asking:
                tool = str(request["toolName"])
                if tool in self.always:
                    return "allow_once"
                if self.cancelling:
                    return "reject_once"
                outcome = await self.view.ask(request)
                if outcome == "allow_always":
                    self.always.add(tool)
                return outcome
        self.view.note(
            f"not approved: {request['toolName']} ({request['reason']}): no terminal to ask. "
            "Pass --yes to allow what the profile asks, or choose another --profile "
            "(see cleveragents run --help)"
        )
        return NotAsked(NOT_ASKED)

    async def elicit(self, run_id: str | None, request: Elicitation) -> ElicitationAnswer:
        """An MCP server's question: asked on the terminal approvals are asked on (one
        question at a time); declined off one, and under ``--yes``, which answers only
        what the profile asks."""
        if self.terminal is None or self.cancelling:
            self.view.note(
                f"declined: MCP server {printable(request.server)} asked a question, and "
                "there is no terminal to ask it on"
                + (" (--yes answers approvals, not questions)" if self.options.yes else "")
            )
            return ElicitationAnswer("decline")
        async with self.asking:
            if self.cancelling:
                return ElicitationAnswer("cancel")
            return await self.view.elicit(request)

    def request(self) -> RunRequest:
        options = self.options
        return RunRequest(
            prompt=options.prompt, run_id=self.run_id, system_prompt=options.system,
            instructions=options.instructions,
            model=options.model, max_iterations=options.max_iterations,
            automation_profile=options.profile, continue_from=options.continue_from,
            limits=options.limits, ask=self.ask, checkpoints=options.checkpoints,
            fork_from=options.fork_from,
        )  # fmt: skip


class _ViewLog(logging.Handler):
    """The service's log (warnings: an MCP server, a transcript it cannot write) on
    stderr through the view, as the daemon's stderr lines were: above a live region."""

    def __init__(self, view: View) -> None:
        super().__init__(logging.WARNING)
        self.view = view
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a log line never breaks the run
            self.view.daemon_line(self.format(record))


async def _run(options: RunOptions, tools: list[ToolSpec]) -> int:
    session = _Session(options)
    view = session.view
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, session.on_sigint)
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, session.on_stop_signal, signum)
    log = _ViewLog(view)
    log.addFilter(log_scrubber())  # secrets and URL credentials, whatever logger wrote
    logging.getLogger().addHandler(log)
    settings = RunSettings(
        state_dir=options.state_dir, workspace_folders=(str(options.workspace),),
        mcp_servers=tuple(options.mcp_servers),
    )  # fmt: skip
    service = RunService(
        settings, tools, mcp_client=McpClientSide(elicit=session.elicit),
        on_authorize=open_sign_in,
    )  # fmt: skip
    watch_pipe(sys.stdout, session.stdout)
    try:
        view.start()
        try:
            handle = await service.start(session.request(), session)
        except CleverAgentsError as exc:
            view.stop()
            print(printable(f"cleveragents run: {refusal_text(exc)}"), file=sys.stderr)
            # --fork --restore-files refused by the files (conflicts): as revert's refusal
            return EXIT_CONFLICTS if isinstance(exc, CheckpointError) else EXIT_USAGE
        session.attach(handle)
        await handle.result()
        changes = await run_changes(service, session)
    finally:
        view.stop()
        await service.aclose()
        for signum in (signal.SIGINT, *STOP_SIGNALS):
            loop.remove_signal_handler(signum)
        with contextlib.suppress(OSError, ValueError):
            loop.remove_reader(sys.stdout.fileno())
        logging.getLogger().removeHandler(log)
        if session.terminal is not None:
            session.terminal.close()
    assert handle.result_text is not None  # set before the run's task ends
    result: dict[str, Any] = json.loads(handle.result_text)
    if not session.closed_pipe and session.stopped_by != signal.SIGHUP:  # else none reads
        view.finish(result, service.store.path(handle.run_id))
        if changes is not None:
            view.changes(stat_lines(changes.files, min(terminal_width(view.out), 120)))
    code = session.exit_code(result.get("status"))
    if options.output_file is not None and not write_answer(options.output_file, result):
        return code or 1
    return code


async def run_changes(service: RunService, session: _Session) -> DiffResult | None:
    """What the run changed in its workspace, for the diffstat that ends it; ``None``
    when it took no checkpoint (it changed nothing), the view shows no diffstat
    (``--json``), nobody reads, or the diff cannot be had (a line says why)."""
    if not session.checkpointed or session.closed_pipe or isinstance(session.view, JsonView):
        return None
    try:
        return await service.diff(session.run_id)
    except CleverAgentsError as exc:
        session.view.note(f"no diffstat: {exc.message}")
        return None


def write_answer(path: Path, result: dict[str, Any]) -> bool:
    """``-o FILE``: the answer (printable, as on stdout) into FILE; whether it was."""
    try:
        path.write_text(printable(str(result.get("content") or "")), encoding="utf-8")
    except OSError as exc:
        print(printable(f"cleveragents run: cannot write -o {path}: {exc.strerror or exc}"),
              file=sys.stderr)  # fmt: skip
        return False
    return True


def run_command(options: RunOptions) -> int:
    try:
        tools = builtin_tools(shell=ShellTool())  # the daemon's built-in tools
        prepare_process()
        return asyncio.run(_run(options, tools))
    except KeyboardInterrupt:  # before the handler was installed, or after it was removed
        return EXIT_CODES["cancelled"]
