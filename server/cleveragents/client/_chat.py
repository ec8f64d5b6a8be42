"""``cleveragents chat``: a conversation in the workspace, on one in-process run service.

Each message is a run that continues the last one's conversation (``continue_from``),
shown and answered as ``cleveragents run`` shows and answers its run (``commands``: the
live view, approvals, the service's log lines); the run service, its model clients and
its MCP servers live as long as the chat. This module owns the conversation: which run
the next message continues, the slash commands, and the keys between turns:

- Ctrl-C during a turn cancels it: what the model had said stays on the screen and in
  the conversation, which the next message continues; a second Ctrl-C before the turn
  has ended leaves at once (exit 130), as in ``run``.
- At the prompt (``_chat_input``), Ctrl-C clears the line; on an empty line it says how
  to leave, and a second one leaves. Ctrl-D on an empty line, and ``/exit``, leave.
- SIGTERM and SIGHUP cancel the turn, if one runs, and end the chat (exit 143, 129).

A refused turn (a model the service cannot build) and a failed one leave the chat as it
was: the next message continues the conversation from before them. ``/compact`` asks the
model for a summary of the conversation (a turn of its own, without tools) and starts a
new conversation from it: the next message goes with the summary before it.
``/diff`` shows what this chat's turns changed in the workspace (from before the first
change of its first turn to after its last turn) and ``/undo`` puts back the files the
last turn changed, through the run service's checkpoints: a file changed since by
someone else refuses it (``/undo force`` overrides), and the reply names the checkpoint
that undoes the undo (``/restore ID``).

It needs a terminal (the command line refuses to start it off one); it knows the
transcripts only through the run service, and the command line's rules for a model
spec only through ``ChatOptions.check_model``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._mcp_login import open_sign_in
from ..checkpoints import DiffResult
from ..llm import log_scrubber
from ..llm.errors import ModelConfigError
from ..llm.spec import parse_model_spec
from ..runs import (
    Elicitation,
    ElicitationAnswer,
    McpClientSide,
    RunRequest,
    RunService,
    RunSettings,
    prepare_process,
)
from ..tool import CleverAgentsError, ToolSpec, UsageLimits
from ..workspace import ShellTool, builtin_tools
from ..workspace.profiles import BUILTIN_PROFILES
from ._changes import patch_lines, restore_lines, stat_lines, undo_command
from ._terminal import printable
from ._views import terminal_width
from .commands import (
    EXIT_CODES,
    STOP_SIGNALS,
    RunOptions,
    _Session,
    _ViewLog,
    refusal_text,
    run_changes,
)

EXIT_LEFT = 0
SUMMARY_REQUEST = (
    "Summarise our conversation so far for yourself, so that you can go on from the "
    "summary alone: my goals, what was done (files read or changed, commands run, their "
    "results), what was learned and decided, and what remains to do. Keep names, paths, "
    "identifiers and numbers exact. Answer with the summary only."
)
"""The prompt of ``/compact``'s turn."""
SUMMARY_HEAD = "A summary of our conversation so far (compacted at my request):"
MESSAGE_HEAD = "My next message:"

HELP = [
    ("/model [SPEC]", "show the model, or use SPEC from the next message on"),
    ("/profile [NAME]", "show the automation profiles, or use NAME from the next message on"),
    ("/runs", "this chat's runs, one per message (cleveragents runs show ID)"),
    ("/compact", "summarise the conversation and go on from the summary alone"),
    ("/diff", "what this chat's turns changed in the workspace"),
    ("/undo [force]", "put back the files the last turn changed, and the conversation before it"),
    ("/restore ID [force]", "put the files back as they were at checkpoint ID (undo an /undo)"),
    ("/help", "this list"),
    ("/exit", "leave the chat (as Ctrl-D)"),
]
KEYS = (
    "Enter sends · Alt-Enter, or a line ending in \\, starts a new line · Up/Down: "
    "earlier messages · Ctrl-C cancels a turn · Ctrl-D leaves"
)


@attrs.frozen
class ChatOptions:
    """What ``cleveragents chat`` was asked, resolved (flags, environment, config, the
    continued run)."""

    workspace: Path
    state_dir: Path
    model: str | dict[str, Any]
    profile: str
    check_model: Callable[[str], str | dict[str, Any]]
    """``/model``'s argument as ``-m`` takes it (bare names, ``@FILE``, JSON); raises
    ``ValueError`` naming what is wrong."""
    system: str | None = None
    instructions: bool = True
    """The default system prompt and AGENTS.md (``--no-instructions``: neither)."""
    max_iterations: int | None = None
    yes: bool = False
    continue_from: str | None = None
    continued_prompt: str = ""
    """The continued run's prompt, shown when the chat starts."""
    reasoning: bool = True
    """Whether the model's reasoning is shown (``--no-reasoning``: not)."""
    limits: UsageLimits | None = None
    """Each message's ``--max-tool-calls``, ``--deadline``, ``--max-tokens``."""
    mcp_servers: tuple[Any, ...] = ()
    """The MCP servers the chat starts, once, for all its messages (as ``run``'s)."""


@attrs.define
class ChatTurn:
    """One message of the chat, as ``/runs`` lists it."""

    run_id: str
    prompt: str
    status: str
    iterations: int = 0
    tool_calls: int = 0
    continued: str | None = None
    """The run this one continued (where ``/undo`` takes the conversation back to)."""
    content: str = ""
    undone: bool = False


class _Turn(_Session):
    """One turn's face: ``run``'s, but Ctrl-C ends the turn, not the command, and a tool
    answered [a]lways is not asked about again for the rest of the chat."""

    def __init__(self, options: RunOptions, always: set[str], tools: Sequence[str] | None) -> None:
        super().__init__(options)
        self.always = always
        self.tools = tools

    def on_sigint(self) -> None:
        self.interrupts += 1
        if self.interrupts > 1:
            self.view.stop()
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            os._exit(EXIT_CODES["cancelled"])
        self.view.note("cancelling the turn (Ctrl-C again to leave the chat at once)")
        self.cancel()

    def request(self) -> RunRequest:
        request = super().request()
        return request if self.tools is None else attrs.evolve(request, tools=list(self.tools))


class Chat:
    """The conversation: its settings as the slash commands leave them, its turns, and
    the run the next message continues."""

    def __init__(self, options: ChatOptions, service: RunService, read: Callable[[], Any]) -> None:
        self.options = options
        self.service = service
        self.read = read
        self.model: str | dict[str, Any] = options.model
        self.profile = options.profile
        self.last: str | None = options.continue_from
        """The run the next message continues (``None``: a new conversation)."""
        self.summary: str | None = None
        """``/compact``'s summary, sent before the next message."""
        self.turns: list[ChatTurn] = []
        self.always: set[str] = set()
        self.current: _Turn | None = None
        self.stopped_by: int | None = None
        self.interrupted = False
        """Ctrl-C was pressed at an empty prompt (or cancelled a turn): the next leaves."""
        self.leave_prompt: Callable[[], None] = lambda: None

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> int:
        self.header()
        while self.stopped_by is None:
            try:
                text = await self.read()
            except EOFError:
                break
            except KeyboardInterrupt:
                if self.interrupted:
                    break
                self.interrupted = True
                say("(Ctrl-C again, Ctrl-D or /exit to leave the chat)")
                continue
            self.interrupted = False
            if self.stopped_by is not None:
                break
            if not text.strip():
                continue
            if text.startswith("/") and not text.startswith("//"):
                if not await self.command(text):
                    break
            else:
                await self.message(text[1:] if text.startswith("//") else text)
        return 128 + self.stopped_by if self.stopped_by is not None else EXIT_LEFT

    def header(self) -> None:
        options = self.options
        say(f"cleveragents chat · {describe(self.model)} · profile {self.profile} · "
            f"{options.workspace}")  # fmt: skip
        if options.continue_from is not None:
            first = (options.continued_prompt.strip().splitlines() or [""])[0]
            say(f"continuing run {options.continue_from}: {cut(first, 60)}")
        say(KEYS + " · /help")

    def on_stop_signal(self, signum: int) -> None:
        """SIGTERM, SIGHUP: the turn is cancelled and recorded, and the chat ends."""
        self.stopped_by = signum
        if self.current is not None:
            self.current.on_stop_signal(signum)
        else:
            self.leave_prompt()

    # -- turns ---------------------------------------------------------------------------

    async def message(self, text: str) -> None:
        prompt = text
        if self.summary is not None:
            prompt = f"{SUMMARY_HEAD}\n\n{self.summary}\n\n{MESSAGE_HEAD}\n\n{text}"
        turn = await self.turn(prompt)
        if turn is not None and turn.status != "failed":
            self.summary = None  # in the conversation now

    async def turn(
        self, prompt: str, *, tools: Sequence[str] | None = None,
        max_iterations: int | None = None,
    ) -> ChatTurn | None:  # fmt: skip
        """Run one message as a run continuing ``last``; ``None`` when the service refused
        to start it (the reason is printed)."""
        options = self.options
        run_options = RunOptions(
            prompt=prompt, workspace=options.workspace, state_dir=options.state_dir,
            instructions=options.instructions,
            model=self.model, profile=self.profile, system=options.system,
            max_iterations=max_iterations or options.max_iterations, yes=options.yes,
            continue_from=self.last, reasoning=options.reasoning, limits=options.limits,
        )  # fmt: skip
        session = _Turn(run_options, self.always, tools)
        view = session.view
        loop = asyncio.get_running_loop()
        log = _ViewLog(view)
        log.addFilter(log_scrubber())
        logging.getLogger().addHandler(log)
        loop.add_signal_handler(signal.SIGINT, session.on_sigint)
        self.current = session
        try:
            view.start()
            try:
                handle = await self.service.start(session.request(), session)
            except CleverAgentsError as exc:
                view.stop()
                say(f"not sent: {refusal_text(exc)}")
                return None
            session.attach(handle)
            await handle.result()
        finally:
            self.current = None
            view.stop()
            loop.remove_signal_handler(signal.SIGINT)
            logging.getLogger().removeHandler(log)
            if session.terminal is not None:
                session.terminal.close()
        assert handle.result_text is not None  # set before the run's task ends
        result: dict[str, Any] = json.loads(handle.result_text)
        if session.stopped_by is None:
            view.finish(result, self.service.store.path(handle.run_id))
            changes = await run_changes(self.service, session)
            if changes is not None:  # the turn's diffstat, as run ends with
                view.changes(stat_lines(changes.files, min(terminal_width(view.out), 120)))
        status = str(result.get("status"))
        turn = ChatTurn(
            handle.run_id, prompt, status, int(result.get("iterations") or 0),
            len(result.get("toolCallHistory") or []), self.last, str(result.get("content") or ""),
        )  # fmt: skip
        self.turns.append(turn)
        if status == "failed":
            say("the conversation goes on from before this message")
        else:
            self.last = handle.run_id  # a cancelled turn's words are kept, for the next
        if status == "cancelled":
            self.interrupted = True  # a second Ctrl-C at the prompt leaves
        if session.stopped_by is not None and self.stopped_by is None:
            self.stopped_by = session.stopped_by
        if session.closed_pipe and self.stopped_by is None:
            self.stopped_by = signal.SIGHUP  # the terminal is gone
        return turn

    # -- slash commands ------------------------------------------------------------------

    async def command(self, text: str) -> bool:
        """Do a slash command; ``False`` when it ends the chat."""
        name, _, argument = text.strip().partition(" ")
        argument = argument.strip()
        if name in ("/exit", "/quit"):
            return False
        if name == "/help":
            width = max(len(usage) for usage, _ in HELP)
            for usage, words in HELP:
                say(f"  {usage:<{width}}  {words}")
            say("  //TEXT           send TEXT starting with a single /")
            say(KEYS)
        elif name == "/model":
            self.set_model(argument)
        elif name == "/profile":
            self.set_profile(argument)
        elif name == "/runs":
            self.list_runs()
        elif name == "/compact":
            await self.compact()
        elif name == "/diff":
            await self.diff()
        elif name == "/undo":
            await self.undo(argument)
        elif name == "/restore":
            await self.restore(argument)
        else:
            say(f"unknown command {cut(name, 30)}: /help lists them (//TEXT sends a message "
                "starting with /)")  # fmt: skip
        return True

    def set_model(self, argument: str) -> None:
        if not argument:
            say(f"model: {describe(self.model)}")
            return
        try:
            self.model = self.options.check_model(argument)
        except ValueError as exc:  # its message names /model
            say(str(exc))
            return
        say(f"model: {describe(self.model)} (from the next message on)")

    def set_profile(self, argument: str) -> None:
        if not argument:
            for name, profile in BUILTIN_PROFILES.items():
                mark = "*" if name == self.profile else " "
                say(f"{mark} {name:<11} {profile.description}")
            return
        if argument not in BUILTIN_PROFILES:
            say(f"/profile: unknown profile {cut(argument, 30)!r}; choose one of "
                + ", ".join(BUILTIN_PROFILES))  # fmt: skip
            return
        self.profile = argument
        say(f"profile: {argument} (from the next message on)")

    def list_runs(self) -> None:
        if self.options.continue_from is not None:
            say(f"   {self.options.continue_from}  (continued)")
        if not self.turns:
            say("no message sent yet")
        for number, turn in enumerate(self.turns, 1):
            status = "undone" if turn.undone else turn.status
            calls = f"{turn.tool_calls} tool call{'s' if turn.tool_calls != 1 else ''}"
            first = (turn.prompt.strip().splitlines() or [""])[0]
            say(f"{number:>2} {turn.run_id}  {status:<9} {calls:<12} {cut(first, 40)}")

    async def compact(self) -> None:
        if self.last is None:
            say("/compact: nothing to compact yet")
            return
        before = self.last
        turn = await self.turn(SUMMARY_REQUEST, tools=(), max_iterations=1)
        if turn is None or turn.status != "completed" or not turn.content.strip():
            self.last = before  # the request for a summary is no part of the conversation
            say("/compact: no summary; the conversation goes on as it was")
            return
        self.summary = turn.content.strip()
        self.last = None
        say("compacted: the next message starts a new conversation, with this summary before it")

    async def diff(self) -> None:
        """``/diff``: what this chat's turns changed, as a diffstat and a patch."""
        runs = [turn.run_id for turn in self.turns if not turn.undone]
        try:
            diff = await chat_diff(self.service, str(self.options.workspace), runs)
        except CleverAgentsError as exc:
            say(f"/diff: {exc.message}")
            return
        colour = not os.environ.get("NO_COLOR")
        lines = stat_lines(diff.files, terminal_width())
        if diff.patch:
            lines += ["", *patch_lines(diff, colour)]
        for line in lines:  # printable already; the colours are ours
            print(line, flush=True)

    async def undo(self, argument: str) -> None:
        """``/undo [force]``: the last turn's files put back, and the conversation goes
        on from before it; refused (nothing changed) when a file it would touch changed
        since, unless forced."""
        if argument not in ("", "force"):
            say("/undo takes nothing, or force (to overwrite files changed since)")
            return
        done = [turn for turn in self.turns if not turn.undone]
        if not done:
            say("/undo: no turn of this chat to undo")
            return
        turn = done[-1]
        try:
            result = await self.service.revert(turn.run_id, force=argument == "force")
        except CleverAgentsError as exc:
            say(f"/undo: {exc.message}")
            return
        checkpoint = result.restore_checkpoint_id
        lines, refused = restore_lines(
            result, f"/undo of run {turn.run_id[:8]}", force_hint="/undo force",
            undo=f"/restore {checkpoint}" if checkpoint else None,
        )  # fmt: skip
        for line in lines:
            say(line)
        if refused:
            return
        if checkpoint:
            say(f"  (or from a shell: {undo_command(checkpoint, str(self.options.workspace))})")
        turn.undone = True
        self.last = turn.continued
        say("the next message goes on from before that turn")

    async def restore(self, argument: str) -> None:
        """``/restore ID [force]``: the workspace's files as they were at checkpoint ID
        (the one ``/undo`` named undoes it). The conversation is left as it is."""
        checkpoint, _, force = argument.partition(" ")
        if not checkpoint or force.strip() not in ("", "force"):
            say("/restore takes a checkpoint id (as /undo prints it), then force or nothing")
            return
        try:
            result = await self.service.restore_checkpoint(
                checkpoint, root=self.options.workspace, force=bool(force.strip())
            )
        except CleverAgentsError as exc:
            say(f"/restore: {exc.message}")
            return
        undo = result.restore_checkpoint_id
        lines, _ = restore_lines(
            result, f"/restore of checkpoint {cut(checkpoint, 20)}",
            force_hint=f"/restore {cut(checkpoint, 20)} force",
            undo=f"/restore {undo}" if undo else None,
        )  # fmt: skip
        for line in lines:
            say(line)


async def chat_diff(service: RunService, root: str, run_ids: Sequence[str]) -> DiffResult:
    """What runs ``run_ids`` (a chat's turns, oldest first) changed in the workspace
    ``root``."""
    return await service.diff_runs(root, run_ids)


def say(text: str) -> None:
    """A line of the chat's own (not the model's), printable."""
    print(printable(text), flush=True)


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(model: str | dict[str, Any]) -> str:
    """A model spec as people name it (``openai:gpt-4o-mini``)."""
    with contextlib.suppress(ModelConfigError):
        return printable(parse_model_spec(model).describe())
    return printable(model if isinstance(model, str) else json.dumps(model))


async def _chat(options: ChatOptions, tools: list[ToolSpec]) -> int:
    from ._chat_input import LineEditor

    settings = RunSettings(
        state_dir=options.state_dir, workspace_folders=(str(options.workspace),),
        mcp_servers=tuple(options.mcp_servers),
    )  # fmt: skip
    chat: Chat | None = None

    async def elicit(run_id: str | None, request: Elicitation) -> ElicitationAnswer:
        """An MCP server's question, asked by the turn in progress (declined between)."""
        turn = chat.current if chat is not None else None
        if turn is None:
            return ElicitationAnswer("decline")
        return await turn.elicit(run_id, request)

    service = RunService(
        settings, tools, on_authorize=open_sign_in, mcp_client=McpClientSide(elicit=elicit)
    )
    editor = LineEditor(options.state_dir)
    chat = Chat(options, service, editor.read)
    chat.leave_prompt = editor.leave
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, chat.on_stop_signal, signum)
    try:
        return await chat.run()
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
        editor.close()
        await service.aclose(reason="the chat ended")


def run_chat(options: ChatOptions) -> int:
    try:
        tools = builtin_tools(shell=ShellTool())  # the daemon's built-in tools
        prepare_process()
        return asyncio.run(_chat(options, tools))
    except KeyboardInterrupt:  # between the handlers: as a Ctrl-C at the prompt
        return EXIT_CODES["cancelled"]
