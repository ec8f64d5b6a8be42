"""One ACP session: its tools (the service's, the editor's file system in place of the
built-in file tools when it lends one, its own MCP servers'), its sandbox roots, and the
translation of its runs' typed events into ``session/update``.

Each ``session/prompt`` is one run of the agent's ``RunService``, whose events come here
as the observer (``on_event``). The profile's "ask" is ACP's
``session/request_permission``; a call allowed to run is marked ``in_progress``, and a
file's text is noted before an edit, for the diff.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

import attrs

from ..protocol import RpcError
from ..runs import McpServers, RunService
from ..tool import (
    PERMISSION_OUTCOMES,
    CleverAgentsError,
    Compacted,
    IterationFinished,
    MessageDelta,
    PermissionOutcome,
    PermissionQuery,
    ReasoningDelta,
    RunEvent,
    RunFinished,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallRecord,
    ToolCallStarted,
    ToolRegistry,
    ToolSpec,
)
from ..workspace import read_confined_text, resolve_path
from . import _mapping as mp
from ._editor_fs import EditorFiles

if TYPE_CHECKING:
    from ._rpc import AcpDispatcher
    from ._store import SessionStore

logger = logging.getLogger(__name__)

_OPTION_NAMES: dict[PermissionOutcome, str] = {
    "allow_once": "Allow", "allow_always": "Always allow",
    "reject_once": "Reject", "reject_always": "Always reject",
}  # fmt: skip
OPTIONS = [{"optionId": o, "name": _OPTION_NAMES[o], "kind": o} for o in PERMISSION_OUTCOMES]
"""ACP's permission options: each option id and kind is one of our outcomes (ACP's
``PermissionOptionKind`` has the same four words)."""
_READ_LIMIT = 8 * 1024 * 1024
"""Files larger than this are shown without a diff (the text output stands instead)."""


@attrs.frozen
class Before:
    """The file an edit touches: its real path (shown in the diff), the root and path
    the tool was given (to read it again, confined, after the edit), and its text before
    the edit (``None`` for a new file)."""

    real: str
    root: str
    path: str
    text: str | None


@attrs.define(eq=False)
class Turn:
    """One ``session/prompt``: its run and the tool calls still open."""

    run_id: str
    open_calls: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    """callId -> the tool_call as sent (title, kind, locations, rawInput)."""
    old_texts: dict[str, Before] = attrs.field(factory=dict)
    """callId -> the file an edit touches, and its text before the edit."""
    status: str | None = None
    """How its run ended, once it did."""
    closed: bool = False


class Session:
    """An ACP session and its state."""

    def __init__(
        self,
        meta: dict[str, Any],
        rpc: AcpDispatcher,
        service: RunService,
        builtin_tools: list[ToolSpec],
        store: SessionStore,
        client_fs: dict[str, Any] | None = None,
    ) -> None:
        self.meta = meta
        self.id: str = meta["sessionId"]
        self.rpc = rpc
        self.service = service
        self.store = store
        self.roots = [meta["cwd"], *meta.get("additionalDirectories", [])]
        self.remembered: dict[str, bool] = {}
        """Tool name -> the user's "always" answer, for the life of the session."""
        self.turn: Turn | None = None
        self.editor = EditorFiles(rpc, self.id, client_fs or {})
        """The client's file system, when it offered one (file tools end there)."""
        self.registry = ToolRegistry(parent=service.registry)
        """The session's tools: the editor's file tools over the built-in ones, and its
        MCP servers'."""
        for spec in self.editor.tools(builtin_tools):
            if service.registry.get(spec.name) is not spec:
                self.registry.register(spec, replace=True)
        self.mcp: McpServers = service.mcp_servers(
            "run", self.registry, roots=lambda: list(self.roots), on_authorize=self._sign_in
        )
        """The session's MCP servers: their roots are the session's (``cwd`` and its
        ``additionalDirectories``); a sign-in one needs is shown as a message."""

    # -- updates ---------------------------------------------------------------------

    def send(self, update: dict[str, Any], *, log: bool = True) -> None:
        self.rpc.notify("session/update", {"sessionId": self.id, "update": update})
        if log:
            self.store.append(self.id, update)

    def say(self, text: str) -> None:
        """An agent message of our own (an MCP server that failed to start)."""
        self.send(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        )

    def _sign_in(self, server: Any) -> None:
        """An MCP server waits for the user to sign in (OAuth): ACP has no request to
        open a page, so the URL is shown as an agent message."""
        url = server.authorization_url
        if url is not None:
            self.say(
                f"\nThe MCP server {server.config.name} needs you to sign in. Open this "
                f"page in your browser: {url}\n"
            )

    def on_event(self, event: RunEvent, text: str | None, /) -> None:
        """The turn's run events as ACP updates (the service's ``RunObserver``)."""
        turn = self.turn
        if turn is None or event.run_id != turn.run_id:
            return
        if isinstance(event, RunFinished):
            turn.status = event.result.status
        if turn.closed:
            return
        if isinstance(event, MessageDelta):
            self.send({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": event.text},
                "messageId": f"{turn.run_id}-{event.iteration}",
            })  # fmt: skip
        elif isinstance(event, ReasoningDelta):
            self.send({
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": event.text},
                "messageId": f"{turn.run_id}-{event.iteration}-thought",
            })  # fmt: skip
        elif isinstance(event, ToolCallStarted):
            self._started(turn, event.call_id, event.tool_name, event.inputs)
        elif isinstance(event, IterationFinished):
            if event.context_window is not None and event.context_tokens is not None:
                self.send({
                    "sessionUpdate": "usage_update",
                    "used": event.context_tokens,
                    "size": event.context_window,
                })  # fmt: skip
        elif isinstance(event, Compacted):
            how = _COMPACTED.get(event.strategy, event.strategy)
            self.send({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": (
                    f"\n[context compacted: {how}, {event.tokens_before:,} → "
                    f"{event.tokens_after:,} tokens]\n"
                )},
                "messageId": f"{turn.run_id}-{event.iteration}-compacted-{event.seq}",
            })  # fmt: skip
        elif isinstance(event, ToolCallProgress):
            self._progress(turn, event)
        elif isinstance(event, ToolCallFinished):
            self._ended(turn, event.record)

    def _tool_call_id(self, turn: Turn, call_id: str) -> str:
        return f"{turn.run_id}/{call_id}"

    def _started(self, turn: Turn, call_id: str, name: str, arguments: Any) -> None:
        arguments = arguments if isinstance(arguments, dict) else {}
        spec = self.registry.get(name)
        call = {
            "toolCallId": self._tool_call_id(turn, call_id),
            "title": mp.tool_title(name, arguments),
            "kind": mp.tool_kind(name, spec),
            "status": "pending",
            "locations": mp.tool_locations(name, arguments, self.roots[0]),
            "rawInput": arguments,
        }
        turn.open_calls[call_id] = call
        self.send({"sessionUpdate": "tool_call", **call})

    async def running(self, query: PermissionQuery) -> None:
        turn = self.turn
        if turn is None or turn.closed:
            return
        name = query.spec.name
        if name in mp.EDIT_TOOLS:
            inputs = query.inputs or {}
            found = await asyncio.to_thread(_file_text, inputs)
            if found is not None:
                known = self.editor.known(found.real) if self.editor.writes else None
                turn.old_texts[query.call_id] = (
                    found if known is None else attrs.evolve(found, text=known)
                )
        self._update(turn, query.call_id, {"status": "in_progress"}, log=False)

    def _update(self, turn: Turn, call_id: str, fields: dict[str, Any], *, log: bool) -> None:
        update = {"sessionUpdate": "tool_call_update"}
        update["toolCallId"] = self._tool_call_id(turn, call_id)
        self.send({**update, **fields}, log=log)

    def _progress(self, turn: Turn, event: ToolCallProgress) -> None:
        """An MCP call's progress: the call's content becomes one line saying where it
        stands (ACP has no progress field; the numbers go in ``_meta``). Not logged:
        the final content replaces it."""
        if event.call_id not in turn.open_calls:
            return
        fields = {
            "status": "in_progress",
            "content": mp.text_content(progress_line(event)),
            "_meta": {"cleveragents": {"progress": event.progress, "total": event.total}},
        }
        self._update(turn, event.call_id, fields, log=False)

    def _ended(self, turn: Turn, record: ToolCallRecord) -> None:
        call_id, name = record.call_id, record.tool_name
        turn.open_calls.pop(call_id, None)
        fields: dict[str, Any]
        if record.success:
            content = mp.output_content(name, record.output)
            before = turn.old_texts.pop(call_id, None)
            if before is not None:
                # Read again as the tools read (no link followed, no FIFO waited on, bounded)
                new = (
                    self.editor.known(before.real)
                    if self.editor.writes
                    else read_confined_text(before.root, before.path, _READ_LIMIT)
                )
                if new is not None:
                    content = mp.diff_content(before.real, before.text, new)
            fields = {"status": "completed", "rawOutput": record.output, "content": content}
        else:
            error = str(record.error or "failed")
            fields = {
                "status": "failed",
                "rawOutput": {"error": error},
                "content": mp.text_content(error),
            }
        self._update(turn, call_id, fields, log=True)

    def close_turn(self, reason: str) -> None:
        """The turn is over: every call still open gets its final ``failed``; nothing for
        this turn is sent after this."""
        turn = self.turn
        if turn is None or turn.closed:
            return
        for call_id in list(turn.open_calls):
            turn.open_calls.pop(call_id)
            fields = {
                "status": "failed", "rawOutput": {"error": reason},
                "content": mp.text_content(reason),
            }  # fmt: skip
            self._update(turn, call_id, fields, log=True)
        turn.closed = True

    # -- permission ------------------------------------------------------------------

    async def ask(self, query: PermissionQuery, reason: str) -> PermissionOutcome:
        """The profile's \"ask\": ``session/request_permission``, answered once per tool
        when the user chose \"always\"."""
        name = query.spec.name
        remembered = self.remembered.get(name)
        if remembered is not None:
            return "allow_once" if remembered else "reject_once"
        turn = self.turn
        call = dict(turn.open_calls.get(query.call_id, {})) if turn is not None else {}
        call.setdefault("toolCallId", f"{turn.run_id if turn else ''}/{query.call_id}")
        call.setdefault("title", mp.tool_title(name, query.arguments))
        params = {"sessionId": self.id, "toolCall": call, "options": OPTIONS}
        msg_id, future = self.rpc.request("session/request_permission", params)
        try:
            reply = await future
        except asyncio.CancelledError:
            self.rpc.cancel_request(msg_id)
            raise
        except RpcError as exc:
            logger.warning("session/request_permission failed: %s; rejecting", exc)
            return "reject_once"
        outcome = reply.get("outcome") if isinstance(reply, dict) else None
        kind = outcome.get("outcome") if isinstance(outcome, dict) else None
        if kind == "cancelled":
            self.cancel("the permission prompt was cancelled")
            return "reject_once"
        option = outcome.get("optionId") if isinstance(outcome, dict) else None
        chosen = next((o for o in PERMISSION_OUTCOMES if o == option), None)
        if kind != "selected" or chosen is None:
            logger.warning("session/request_permission answered %r; rejecting", outcome)
            return "reject_once"
        if chosen == "allow_always":
            self.remembered[name] = True
        elif chosen == "reject_always":
            self.remembered[name] = False
        return chosen

    # -- cancel ----------------------------------------------------------------------

    def cancel(self, reason: str = "session/cancel") -> None:
        turn = self.turn
        if turn is None or turn.closed:
            return
        handle = self.service.handle(turn.run_id)
        if handle is not None:
            handle.cancel(reason)

    async def close(self) -> None:
        self.cancel("session/close")
        handle = self.service.handle(self.turn.run_id) if self.turn is not None else None
        if handle is not None:
            await handle.wait(timeout=2.0)
        await self.mcp.close()
        self.store.close(self.id)


def _file_text(inputs: dict[str, Any]) -> Before | None:
    """The file an edit will change, confined exactly as the tool confines it, and its
    text now (``None``: it does not exist yet); ``None`` when it cannot be shown (refused,
    not a regular file, too big, not text)."""
    path, root = inputs.get("path"), inputs.get("sandbox_root")
    if not isinstance(path, str) or not isinstance(root, str):
        return None
    try:
        real = resolve_path(root, path)
    except (CleverAgentsError, OSError, ValueError):
        return None
    if not os.path.lexists(real):
        return Before(str(real), root, path, None)
    text = read_confined_text(root, path, _READ_LIMIT)
    return None if text is None else Before(str(real), root, path, text)


_COMPACTED = {"prune": "older tool outputs cut", "summary": "older messages summarised"}


def progress_line(event: ToolCallProgress) -> str:
    """``40 of 100: indexing``; only what the server gave (``40``, ``40: indexing``)."""
    done = f"{event.progress:g}"
    where = f"{done} of {event.total:g}" if event.total is not None else done
    return f"{where}: {event.message}" if event.message else where
