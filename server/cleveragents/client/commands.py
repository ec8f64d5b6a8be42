"""``cleveragents run``: one run on a spawned daemon, shown as it happens.

The command line (``cli``) resolves the arguments into :class:`RunOptions`; this module
spawns the daemon, declares the permission capability, starts the run and shows it
through a view (``_views``, ``_live``). It owns the run's interaction with the person at
the terminal:

- approvals: ``--yes`` allows what the profile would ask; on a terminal the view asks;
  otherwise the call is refused and one line names ``--yes`` and ``--profile``;
- Ctrl-C: the first sends ``run/cancel`` and the run ends as ``cancelled`` (with
  ``--json``, its ``run/finished`` is still printed); a second exits at once. The
  daemon runs in a session of its own, so the terminal's SIGINT never reaches it;
- a closed stdout (``| head``): the run is cancelled quietly and the exit code is 141,
  as for a process killed by SIGPIPE.

Exit codes (docs/cli.md, "Ctrl-C and exit codes"): 0 completed, 1 failed or limit,
130 cancelled, 2 usage error (a ``run/start`` the daemon refused included).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import attrs

from ..protocol import methods as m
from ..tool import PermissionOutcome
from ._client import Client
from ._connection import RpcError
from ._stderr import DaemonStartError
from ._terminal import printable
from ._views import JsonView, Output, View

EXIT_CODES = {"completed": 0, "failed": 1, "limit": 1, "cancelled": 130}
EXIT_USAGE = 2
EXIT_CLOSED = 141

# RunParams fields as the person typed them: a refused run/start speaks of flags.
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


def make_view(options: RunOptions, on_closed: Any) -> View:
    out = Output(sys.stdout, on_closed)
    if options.json:
        return JsonView(out)
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        from ._live import LiveView

        return LiveView(out)
    return View(out)


class _Session:
    """One run's state shared by the signal handler, the event callback and approvals."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.run_id = uuid.uuid4().hex
        self.client: Client | None = None
        self.started = False
        self.cancelling = False
        self.closed_pipe = False
        self.interrupts = 0
        self.always: set[str] = set()  # tools answered [a]lways: not asked again this run
        self.asking = asyncio.Lock()  # one question at a time (calls may ask at once)
        self.view = make_view(options, self.on_closed)
        self.main = asyncio.current_task()

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        self.view.event(method, params)
        if method == m.RUN_STARTED:
            self.started = True
            if self.cancelling:
                self._send_cancel()

    def on_sigint(self) -> None:
        self.interrupts += 1
        if self.interrupts > 1:
            self.view.stop()
            if self.client is not None and self.client.process.returncode is None:
                self.client.process.kill()
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            os._exit(EXIT_CODES["cancelled"])
        self.view.note("cancelling the run (Ctrl-C again to quit at once)")
        self.cancel()

    def on_closed(self) -> None:
        self.closed_pipe = True
        self.cancel()

    def cancel(self) -> None:
        if self.cancelling:
            return
        self.cancelling = True
        self.view.interrupt_ask()
        if self.client is None:
            if self.main is not None:
                self.main.cancel()  # still spawning: nothing to cancel but ourselves
        elif self.started:
            self._send_cancel()
        # else: sent as soon as run/started arrives (the daemon does not know it yet)

    def _send_cancel(self) -> None:
        assert self.client is not None
        self.client._send_cancel(self.run_id)

    async def on_permission(self, params: dict[str, Any]) -> PermissionOutcome:
        if self.options.yes:
            return "allow_once"
        if self.cancelling:
            return "reject_once"
        if self.options.interactive:
            async with self.asking:
                tool = str(params.get("toolName"))
                if tool in self.always:
                    return "allow_once"
                if self.cancelling:
                    return "reject_once"
                outcome = await self.view.ask(params)
                if outcome == "allow_always":
                    self.always.add(tool)
                return outcome
        self.view.note(
            f"refused {params.get('toolName')}: {params.get('reason')}. Pass --yes to allow "
            "what the profile asks, or choose another --profile (see cleveragents run --help)"
        )
        return "reject_once"


async def _run(options: RunOptions) -> int:
    session = _Session(options)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, session.on_sigint)
    view = session.view
    params: dict[str, Any] = {"model": options.model, "automationProfile": options.profile,
                              "runId": session.run_id}  # fmt: skip
    if options.system is not None:
        params["systemPrompt"] = options.system
    if options.max_iterations is not None:
        params["maxIterations"] = options.max_iterations
    if options.continue_from is not None:
        params["continueFrom"] = options.continue_from
    try:
        async with await Client.spawn(
            options.workspace, state_dir=options.state_dir, permissions=True,
            on_stderr=view.daemon_line,
        ) as client:  # fmt: skip
            session.client = client
            client.permission_handler = session.on_permission
            view.start()
            try:
                result = await client.run(options.prompt, on_event=session.on_event, **params)
            except RpcError as exc:
                view.stop()
                print(printable(f"cleveragents run: {flag_words(exc.message)}"), file=sys.stderr)
                return EXIT_USAGE
            finally:
                view.stop()
    except DaemonStartError as exc:
        view.stop()
        print(printable(f"cleveragents run: {exc}"), file=sys.stderr)
        return 1
    except asyncio.CancelledError:
        view.stop()
        return EXIT_CODES["cancelled"]
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if session.closed_pipe:
        return EXIT_CLOSED
    view.finish(result, options.state_dir / "runs" / f"{result['runId']}.jsonl")
    return EXIT_CODES.get(str(result.get("status")), 1)


def run_command(options: RunOptions) -> int:
    try:
        return asyncio.run(_run(options))
    except KeyboardInterrupt:  # before the handler was installed, or after it was removed
        return EXIT_CODES["cancelled"]
