"""One ACP session: its own ``RunManager`` (the daemon's, unchanged) over the session's
sandbox roots and MCP servers, and the translation of its run events into
``session/update``.

The run manager talks to a :class:`SessionPeer` instead of a connection: the
notifications it would send an LSP client (``run/messageDelta``, ``run/toolCallStarted``,
``run/toolCall``, ``run/finished``) become ACP updates here. The permission policy is
the daemon's ``ProfilePolicy`` with ACP's ``session/request_permission`` as its prompt;
it also marks each call ``in_progress`` when it is allowed to run, and notes a file's
text before an edit, for the diff.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ..daemon import DaemonConfig, RunManager
from ..daemon._peer import PeerRequestError
from ..protocol import methods as m
from ..tool import (
    PERMISSION_OUTCOMES,
    CleverAgentsError,
    JsonRpcCode,
    PermissionOutcome,
    PermissionQuery,
    ToolPolicy,
    ToolSpec,
)
from ..workspace import ProfilePolicy, get_profile, resolve_path
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


@attrs.define(eq=False)
class Turn:
    """One ``session/prompt``: its run and the tool calls still open."""

    run_id: str
    open_calls: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    """callId -> the tool_call as sent (title, kind, locations, rawInput)."""
    old_texts: dict[str, tuple[str, str | None]] = attrs.field(factory=dict)
    """callId -> (absolute path, text before the edit or None for a new file)."""
    result: dict[str, Any] | None = None
    closed: bool = False


class SessionPeer:
    """What the session's run manager takes for its connection."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def notify_json(self, method: str, params_text: str) -> None:
        if method in (
            m.RUN_MESSAGE_DELTA,
            m.RUN_TOOL_CALL_STARTED,
            m.RUN_TOOL_CALL,
            m.RUN_FINISHED,
        ):
            self._session.on_run_event(method, json.loads(params_text))

    def request(self, method: str, params: Any) -> tuple[str, asyncio.Future[Any]]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        error = PeerRequestError(
            JsonRpcCode.METHOD_NOT_FOUND, f"{method} is not available over ACP"
        )
        future.set_exception(error)
        return "", future

    def cancel_request(self, msg_id: str, extra: dict[str, Any] | None = None) -> None:
        pass

    def progress(self, token: str | int, kind: str, message: str, percentage: int | None) -> None:
        pass

    async def pace(self) -> None:
        await self._session.rpc.pace()


class AcpPolicy:
    """The profile's decision; when a call may run: note its file for the diff, then
    mark it ``in_progress``."""

    def __init__(self, inner: ProfilePolicy, session: Session) -> None:
        self._inner = inner
        self._session = session

    async def authorize(self, query: PermissionQuery, /) -> str | None:
        await self._session.rpc.pace()
        refusal = self._inner.authorize(query)
        if isinstance(refusal, Awaitable):
            refusal = await refusal
        if refusal is None:
            await self._session.running(query)
        return refusal


class Session:
    """An ACP session and its state."""

    def __init__(
        self,
        meta: dict[str, Any],
        rpc: AcpDispatcher,
        config: DaemonConfig,
        builtin_tools: list[ToolSpec],
        store: SessionStore,
        client_fs: dict[str, Any] | None = None,
    ) -> None:
        self.meta = meta
        self.id: str = meta["sessionId"]
        self.rpc = rpc
        self.store = store
        self.roots = [meta["cwd"], *meta.get("additionalDirectories", [])]
        self.remembered: dict[str, bool] = {}
        """Tool name -> the user's "always" answer, for the life of the session."""
        self.turn: Turn | None = None
        self.editor = EditorFiles(rpc, self.id, client_fs or {})
        """The client's file system, when it offered one (file tools end there)."""
        tools = self.editor.tools(builtin_tools)
        self.manager = RunManager(SessionPeer(self), config, tools, self._policy)
        self.manager.roots = lambda: self.roots

    def _policy(self, run_id: str, profile: str | None) -> ToolPolicy:
        config = self.manager.config
        profile_obj = get_profile(profile or "supervised", config.custom_profiles)
        return AcpPolicy(ProfilePolicy(profile_obj, ask=self._ask), self)

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

    def on_run_event(self, method: str, params: dict[str, Any]) -> None:
        turn = self.turn
        if turn is None or turn.closed or params.get("runId") != turn.run_id:
            return
        if method == m.RUN_MESSAGE_DELTA:
            self.send({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": params["text"]},
                "messageId": f"{turn.run_id}-{params['iteration']}",
            })  # fmt: skip
        elif method == m.RUN_TOOL_CALL_STARTED:
            self._started(turn, params["callId"], params["toolName"], params["inputs"])
        elif method == m.RUN_TOOL_CALL:
            self._ended(turn, params["record"])
        else:
            turn.result = params["result"]

    def _tool_call_id(self, turn: Turn, call_id: str) -> str:
        return f"{turn.run_id}/{call_id}"

    def _started(self, turn: Turn, call_id: str, name: str, arguments: Any) -> None:
        arguments = arguments if isinstance(arguments, dict) else {}
        spec = self.manager.registry.get(name)
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
                known = self.editor.known(found[0]) if self.editor.writes else None
                turn.old_texts[query.call_id] = found if known is None else (found[0], known)
        self._update(turn, query.call_id, {"status": "in_progress"}, log=False)

    def _update(self, turn: Turn, call_id: str, fields: dict[str, Any], *, log: bool) -> None:
        update = {"sessionUpdate": "tool_call_update"}
        update["toolCallId"] = self._tool_call_id(turn, call_id)
        self.send({**update, **fields}, log=log)

    def _ended(self, turn: Turn, record: dict[str, Any]) -> None:
        call_id, name = record["callId"], record["toolName"]
        turn.open_calls.pop(call_id, None)
        fields: dict[str, Any]
        if record.get("success"):
            content = mp.output_content(name, record.get("output"))
            before = turn.old_texts.pop(call_id, None)
            if before is not None:
                path, old = before
                new = self.editor.known(path) if self.editor.writes else _read(path)
                if new is not None:
                    content = mp.diff_content(path, old, new)
            fields = {"status": "completed", "rawOutput": record.get("output"), "content": content}
        else:
            error = str(record.get("error") or "failed")
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

    async def _ask(self, query: PermissionQuery, reason: str) -> PermissionOutcome:
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
        except PeerRequestError as exc:
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
        run = self.manager.active.get(turn.run_id)
        if run is not None:
            run.cancel.cancel(reason)

    async def close(self) -> None:
        self.cancel("session/close")
        await self.manager.cancel_all(timeout=2.0, reason="session/close")
        await self.manager.mcp.close()
        await self.manager.starter.close_models()
        self.store.close(self.id)


def _file_text(inputs: dict[str, Any]) -> tuple[str, str | None] | None:
    """The file an edit will change, confined exactly as the tool confines it, and its
    text now (None: it does not exist yet); None when it cannot be shown."""
    path, root = inputs.get("path"), inputs.get("sandbox_root")
    if not isinstance(path, str) or not isinstance(root, str):
        return None
    try:
        real = resolve_path(root, path)
    except (CleverAgentsError, OSError, ValueError):
        return None
    if not Path(real).exists():
        return str(real), None
    text = _read(str(real))
    return None if text is None else (str(real), text)


def _read(path: str) -> str | None:
    try:
        file = Path(path)
        if file.stat().st_size > _READ_LIMIT:
            return None
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
