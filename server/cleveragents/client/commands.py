"""``cleveragents run``: one run of the run service, in this process, shown as it happens.

The command line (``cli``) resolves the arguments into :class:`RunOptions`; this module
builds the run service (the built-in tools, the state dir, the workspace), starts the run
and shows it through a view (``_views``, ``_live``). The terminal is one more face of the
service: no daemon is spawned, and neither pygls nor lsprotocol is loaded. Each event's
text is its notification's params exactly as the daemon would send them and as the
transcript records them, so the views see what they saw from a daemon, byte for byte.
It owns the run's interaction with the person at the terminal:

- approvals: ``--yes`` allows what the profile would ask; on a terminal the view asks;
  otherwise the call is refused and one line names ``--yes`` and ``--profile``;
- Ctrl-C: the first cancels the run, which ends as ``cancelled`` (the shell tool kills
  its command's process group; with ``--json``, ``run/finished`` is still printed); a
  second exits at once;
- a closed stdout (``| head``): the run is cancelled quietly and the exit code is 141,
  as for a process killed by SIGPIPE;
- SIGTERM, SIGHUP (a closed terminal): the run is cancelled and recorded, as a daemon
  does for its runs, and the exit code is 143 or 129: the tools' commands run in
  sessions of their own, and would outlive a command that just died.

Exit codes (docs/cli.md, "Ctrl-C and exit codes"): 0 completed, 1 failed or limit,
130 cancelled, 2 usage error (a run the service refused before it existed included).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import attrs

from ..llm import log_scrubber
from ..protocol import RUN_EVENTS
from ..runs import (
    PermissionPrompt,
    RunHandle,
    RunRequest,
    RunRequestError,
    RunService,
    RunSettings,
    prepare_process,
)
from ..tool import CleverAgentsError, PermissionOutcome, PermissionQuery, RunEvent, ToolSpec
from ..workspace import ShellTool, builtin_tools
from ._terminal import printable
from ._views import JsonView, Output, View

EXIT_CODES = {"completed": 0, "failed": 1, "limit": 1, "cancelled": 130}
EXIT_USAGE = 2
EXIT_CLOSED = 141
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that cancel the run, then exit with 128 + the signal's number."""

CANCEL_REASON = "cancelled at the terminal"
"""The run's cancel reason (not a signal's name: the result then carries no error, as
for a ``run/cancel``)."""

_METHOD: dict[type, str] = {event: method.name for event, method in RUN_EVENTS.items()}

# A refused request speaks of flags: RunRequest fields (RunRequestError.field) ...
_FIELD_FLAGS = {
    "max_iterations": "--max-iterations", "system_prompt": "--system",
    "automation_profile": "--profile", "continue_from": "--continue",
    "sandbox_root": "--workspace", "model": "--model", "prompt": "the prompt",
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
    max_iterations: int | None = None
    yes: bool = False
    json: bool = False
    continue_from: str | None = None
    interactive: bool = False
    """Whether approvals may be asked at the terminal (stdin is one, and not the prompt)."""


def flag_words(message: str) -> str:
    for pattern, flag in _FLAG_NAMES:
        message = pattern.sub(flag, message)
    return message


def refusal_text(exc: CleverAgentsError) -> str:
    """Why the service refused the run, in the words of the command line."""
    if isinstance(exc, RunRequestError):
        return f"{_FIELD_FLAGS.get(exc.field, exc.field)}: {exc.problem}"
    return flag_words(exc.message)


def make_view(options: RunOptions, on_closed: Any) -> View:
    out = Output(sys.stdout, on_closed)
    if options.json:
        return JsonView(out)
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        from ._live import LiveView

        return LiveView(out)
    return View(out)


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
        self.view = make_view(options, self.on_closed)

    def on_event(self, event: RunEvent, text: str | None, /) -> None:
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

    async def ask(self, query: PermissionQuery, reason: str) -> PermissionOutcome:
        """The run's ``ask``, for a call its profile asks about."""
        if self.options.yes:
            return "allow_once"
        if self.cancelling:
            return "reject_once"
        request = permission_request(self.run_id, query, reason)
        if self.options.interactive:
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
            f"refused {request['toolName']}: {request['reason']}. Pass --yes to allow "
            "what the profile asks, or choose another --profile (see cleveragents run --help)"
        )
        return "reject_once"

    def request(self) -> RunRequest:
        options = self.options
        return RunRequest(
            prompt=options.prompt, run_id=self.run_id, system_prompt=options.system,
            model=options.model, max_iterations=options.max_iterations,
            automation_profile=options.profile, continue_from=options.continue_from,
            ask=self.ask,
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
    settings = RunSettings(state_dir=options.state_dir, workspace_folders=(str(options.workspace),))
    service = RunService(settings, tools)
    try:
        view.start()
        try:
            handle = await service.start(session.request(), session)
        except CleverAgentsError as exc:
            view.stop()
            print(printable(f"cleveragents run: {refusal_text(exc)}"), file=sys.stderr)
            return EXIT_USAGE
        session.attach(handle)
        await handle.result()
    finally:
        view.stop()
        await service.aclose()
        for signum in (signal.SIGINT, *STOP_SIGNALS):
            loop.remove_signal_handler(signum)
        logging.getLogger().removeHandler(log)
    assert handle.result_text is not None  # set before the run's task ends
    result: dict[str, Any] = json.loads(handle.result_text)
    if not session.closed_pipe and session.stopped_by != signal.SIGHUP:  # else none reads
        view.finish(result, service.store.path(handle.run_id))
    return session.exit_code(result.get("status"))


def run_command(options: RunOptions) -> int:
    try:
        tools = builtin_tools(shell=ShellTool())  # the daemon's built-in tools
        prepare_process()
        return asyncio.run(_run(options, tools))
    except KeyboardInterrupt:  # before the handler was installed, or after it was removed
        return EXIT_CODES["cancelled"]
