"""The ACP agent: ACP's methods mapped to sessions, each ``session/prompt`` one run of
the run service.

It is the :class:`~cleveragents.rpc.Handlers` of the ACP dispatcher: the request and
notification tables, ``initialize``, and the one exception-to-wire boundary
(:func:`~cleveragents.rpc.to_rpc_error`). It owns the sessions and nothing of the loop:
runs, tools, profiles, models, MCP servers and transcripts are the run service's.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from .. import __version__
from ..llm.spec import resolve_model_spec
from ..protocol import ParamsError
from ..rpc import RequestHandler, RpcError, to_configs, to_rpc_error
from ..runs import RunRequest, RunService, RunSettings
from ..tool import CleverAgentsError, JsonRpcCode, ToolSpec
from ..workspace import BUILTIN_PROFILES, DEFAULT_PROFILE
from . import _commands as slash
from . import _mapping as mp
from ._model import require_model
from ._params import invalid, mcp_entries, root_directory
from ._rpc import AcpDispatcher
from ._session import Session, Turn
from ._store import SessionStore, Unreadable, valid_session_id

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
RESOURCE_NOT_FOUND = -32002
"""ACP's own code for an unknown session (not one of JSON-RPC's)."""
IDLE_SESSION_S = 30 * 60.0
"""A session with no prompt running for this long is closed: its MCP servers stop and its
log closes. Editors rarely send ``session/close``, so without it every chat thread would
keep its servers' processes and pipes for the life of the agent. It stays in the store,
and its next request reopens it as ``session/resume`` would (checked again)."""
MAX_LIVE_SESSIONS = 32
"""Sessions open at once. Opening one more closes the least recently used one with no
prompt running; when every one is running a prompt, the new one is refused."""
_SWEEP_S = 60.0
"""How often idle sessions are looked for."""
_RETIRED_MAX = 4096
"""Ids of sessions closed while idle that reopen on their next request (oldest forgotten
first; a forgotten one is reopened by ``session/load`` or ``session/resume``)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AcpAgent:
    """The handlers of the ACP face (one client per process, as stdio gives)."""

    def __init__(self, settings: RunSettings, builtin_tools: list[ToolSpec]) -> None:
        self.settings = settings
        self.builtin_tools = builtin_tools
        self.service = RunService(settings, builtin_tools)
        """Every session's runs: one tool catalogue, one model cache, one transcript
        store (its settings have no workspace: each run names its session's roots)."""
        self.store = SessionStore(settings.state_dir)
        self.sessions: dict[str, Session] = {}
        self._used: dict[str, float] = {}
        """Session id -> when a request last named it (``time.monotonic()``)."""
        self._retired: OrderedDict[str, None] = OrderedDict()
        self._sweeper: asyncio.Task[None] | None = None
        self._reopening = asyncio.Lock()
        """One saved session opened at a time: two requests for one never start it twice."""
        self.rpc: AcpDispatcher | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.requests: dict[str, RequestHandler] = {
            name: self._guard(handler)
            for name, handler in {
                "authenticate": self.authenticate,
                "session/new": self.new_session,
                "session/load": self.load_session,
                "session/resume": self.resume_session,
                "session/close": self.close_session,
                "session/list": self.list_sessions,
                "session/set_mode": self.set_mode,
                "session/set_config_option": self.set_config_option,
                "session/prompt": self.prompt,
            }.items()
        }
        self.notifications: dict[str, Any] = {"session/cancel": self.cancel}

    @staticmethod
    def _guard(handler: RequestHandler) -> RequestHandler:
        async def handle(params: Any) -> Any:
            try:
                return await handler(params)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the one request error boundary
                raise to_rpc_error(exc) from None

        return handle

    def all_optional(self, method: str) -> bool:
        return method in ("session/list", "authenticate")

    # -- lifecycle -------------------------------------------------------------------

    def initialize(self, params: dict[str, Any], peer: Any) -> Any:
        capabilities = params.get("clientCapabilities")
        self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.rpc = peer
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "cleveragents", "title": "CleverAgents", "version": __version__},
        }

    async def shutdown(self) -> None:
        await self.close("shutdown")

    async def close(self, reason: str) -> None:
        """The client is gone: end every turn (answered) and stop every MCP server."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        sessions = list(self.sessions.values())
        self.sessions.clear()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        await self.service.aclose(reason=reason)
        self.store.close()

    async def authenticate(self, params: dict[str, Any]) -> Any:
        return {}

    # -- the session's settings ------------------------------------------------------

    def _models(self, session: Session | None = None) -> list[tuple[str, str]]:
        """(value, name) of each configured model: the default, and the session's own."""
        values: list[tuple[str, str]] = []
        try:
            spec = resolve_model_spec(self.settings.model)
            values.append(("default", f"default ({spec.describe()})"))
        except CleverAgentsError:
            pass
        return values

    def _state(self, session: Session) -> dict[str, Any]:
        meta = session.meta
        modes = [
            {"id": p.name, "name": p.name, "description": p.description}
            for p in BUILTIN_PROFILES.values()
        ]
        models = self._models(session)
        model_options = [{"value": v, "name": n} for v, n in models]
        options: list[dict[str, Any]] = [{
            "id": "mode", "name": "Mode", "category": "mode", "type": "select",
            "currentValue": meta["mode"],
            "options": [{"value": m["id"], "name": m["name"], "description": m["description"]}
                        for m in modes],
        }]  # fmt: skip
        if model_options:
            options.append({
                "id": "model", "name": "Model", "category": "model", "type": "select",
                "currentValue": meta.get("model") or model_options[0]["value"],
                "options": model_options,
            })  # fmt: skip
        return {
            "modes": {"currentModeId": meta["mode"], "availableModes": modes},
            "configOptions": options,
        }

    async def _session(self, params: dict[str, Any]) -> Session:
        """The live session a request names; one closed while idle is reopened first."""
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise invalid("params.sessionId", "expected a string")
        session = self.sessions.get(session_id)
        if session is None and session_id in self._retired:
            session = await self._reopen({"sessionId": session_id})
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id!r}")
        self._used[session.id] = time.monotonic()
        return session

    # -- idle sessions ---------------------------------------------------------------

    @staticmethod
    def _busy(session: Session) -> bool:
        return session.turn is not None and not session.turn.closed

    async def _retire(self, session: Session) -> None:
        """Close a session with no prompt running; its next request reopens it."""
        self.sessions.pop(session.id, None)
        self._used.pop(session.id, None)
        self._retired[session.id] = None
        self._retired.move_to_end(session.id)
        while len(self._retired) > _RETIRED_MAX:
            self._retired.popitem(last=False)
        await session.close()

    async def _make_room(self) -> None:
        """Below :data:`MAX_LIVE_SESSIONS` before another session opens."""
        while len(self.sessions) >= MAX_LIVE_SESSIONS:
            idle = [s for s in self.sessions.values() if not self._busy(s)]
            if not idle:
                raise RpcError(
                    JsonRpcCode.INVALID_REQUEST,
                    f"invalid request: all {MAX_LIVE_SESSIONS} open sessions are running a "
                    "prompt; wait for one to end",
                )
            await self._retire(min(idle, key=lambda s: self._used.get(s.id, 0.0)))

    async def close_idle(self) -> None:
        """Close every session idle for :data:`IDLE_SESSION_S` or more."""
        now = time.monotonic()
        for session in list(self.sessions.values()):
            if not self._busy(session) and now - self._used.get(session.id, now) >= IDLE_SESSION_S:
                logger.info("session %s idle for %.0f s: closed", session.id, IDLE_SESSION_S)
                await self._retire(session)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(_SWEEP_S)
            try:
                await self.close_idle()
            except Exception:  # the sweeper must outlive one failed close
                logger.exception("closing idle sessions failed")

    async def _open(self, meta: dict[str, Any], mcp_raw: Any) -> Session:
        """Start a session: its run manager and its MCP servers (waited for)."""
        assert self.rpc is not None
        try:
            configs = to_configs(mcp_entries(mcp_raw), "params.mcpServers")
        except ParamsError as exc:
            raise RpcError(JsonRpcCode.INVALID_PARAMS, str(exc)) from None
        await self._make_room()
        fs = self.client_capabilities.get("fs")
        session = Session(
            meta, self.rpc, self.service, self.builtin_tools, self.store,
            client_fs=fs if isinstance(fs, dict) else None,
        )  # fmt: skip
        if configs:
            session.mcp.start(configs)
            await session.mcp.wait_ready()
            failed = [s for s in session.mcp.statuses() if s.status == "failed"]
            if failed:
                texts = [f"MCP server {s.name!r} failed to start: {s.error or 'no reason given'}"
                         for s in failed]  # fmt: skip
                # After the answer (the client learns the session id from it).
                asyncio.get_running_loop().call_soon(session.say, "\n".join(texts))
        self.sessions[session.id] = session
        self._used[session.id] = time.monotonic()
        self._retired.pop(session.id, None)
        if self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep())
        return session

    # -- requests --------------------------------------------------------------------

    async def new_session(self, params: dict[str, Any]) -> Any:
        cwd = root_directory(params.get("cwd"), "params.cwd")
        extra_raw = params.get("additionalDirectories") or []
        if not isinstance(extra_raw, list):
            raise invalid("params.additionalDirectories", "expected a list")
        extra = [
            root_directory(d, f"params.additionalDirectories[{i}]") for i, d in enumerate(extra_raw)
        ]
        meta = {
            "sessionId": uuid.uuid4().hex, "cwd": cwd, "additionalDirectories": extra,
            "mode": self.settings.automation_profile or DEFAULT_PROFILE, "model": None,
            "mcpServers": params.get("mcpServers") or [], "title": None,
            "updatedAt": _now(), "runs": [],
        }  # fmt: skip
        session = await self._open(meta, params.get("mcpServers"))
        self.store.save(meta)
        self._advertise(session)
        return {"sessionId": session.id, **self._state(session)}

    @staticmethod
    def _advertise(session: Session) -> None:
        """The slash commands a prompt may start with, sent after the answer (the client
        learns the session id from it) and after a load's replay."""
        update = slash.available_commands()
        asyncio.get_running_loop().call_soon(lambda: session.send(update, log=False))

    async def _reopen(self, params: dict[str, Any]) -> Session:
        """A saved session, checked as ``session/new`` checks a new one before anything
        of it starts (see :meth:`_restored`)."""
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not valid_session_id(session_id):
            raise invalid("params.sessionId", "expected a session id")
        async with self._reopening:
            if session_id in self.sessions:
                return self.sessions[session_id]
            return await self._reopen_saved(session_id, params)

    async def _reopen_saved(self, session_id: str, params: dict[str, Any]) -> Session:
        found = await asyncio.to_thread(self.store.read, session_id)
        if found is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id!r}")
        if isinstance(found, Unreadable):
            raise RpcError(
                RESOURCE_NOT_FOUND, f"session {session_id!r} cannot be loaded: {found.reason}"
            )
        meta = self._restored(found, params)
        session = await self._open(meta, meta["mcpServers"])
        self.store.save(meta)
        return session

    def _restored(self, meta: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        """A signed session's settings checked again as ``session/new`` checks them: its
        cwd (which the request's must match, as ACP says) and directories are roots a
        session may have today, its mode a known profile (else the default, never a more
        permissive one), and its MCP servers the client's: those of the request when it
        sends them, else those it sent before, as the signature vouches."""
        requested = params.get("cwd")
        asked = root_directory(requested, "params.cwd") if requested is not None else None
        cwd = root_directory(meta["cwd"], "the session's cwd")
        if asked is not None and asked != cwd:
            raise invalid("params.cwd", f"{requested!r} is not the session's cwd {cwd!r}")
        extra_raw = params.get("additionalDirectories")
        field = "params.additionalDirectories"
        if not extra_raw:  # omitted or empty: the session's own, checked again
            extra_raw, field = meta.get("additionalDirectories", []), "the session's directories"
        if not isinstance(extra_raw, list):
            raise invalid(field, "expected a list")
        extra = [root_directory(d, f"{field}[{i}]") for i, d in enumerate(extra_raw)]
        mode = meta["mode"]
        if mode not in BUILTIN_PROFILES:
            logger.warning("session %s: unknown mode %r, loaded as %s", meta["sessionId"],
                           mode, DEFAULT_PROFILE)  # fmt: skip
            mode = DEFAULT_PROFILE
        mcp_raw = params.get("mcpServers")
        servers = mcp_raw if mcp_raw is not None else meta.get("mcpServers", [])
        return {**meta, "cwd": cwd, "additionalDirectories": extra, "mode": mode,
                "mcpServers": servers}  # fmt: skip

    async def load_session(self, params: dict[str, Any]) -> Any:
        session = await self._reopen(params)
        for update in await asyncio.to_thread(self.store.updates, session.id):
            session.send(update, log=False)
        self._advertise(session)
        return self._state(session)

    async def resume_session(self, params: dict[str, Any]) -> Any:
        session = await self._reopen(params)
        self._advertise(session)
        return self._state(session)

    async def close_session(self, params: dict[str, Any]) -> Any:
        session_id = params.get("sessionId")
        if isinstance(session_id, str) and session_id in self._retired:
            del self._retired[session_id]
            return {}  # closed while idle already
        session = await self._session(params)
        self.sessions.pop(session.id, None)
        self._used.pop(session.id, None)
        await session.close()
        return {}

    async def list_sessions(self, params: dict[str, Any]) -> Any:
        """The sessions that load. A session file that does not (unsigned, planted, of
        the wrong shape) is not offered as a session, which the client would fail to
        load; it is named in ``_meta.cleveragents.unreadableSessions`` with why."""
        cwd = params.get("cwd")
        metas, unreadable = await asyncio.to_thread(self.store.listing)
        rows = [
            {"sessionId": m["sessionId"], "cwd": m["cwd"], "title": m.get("title"),
             "updatedAt": m.get("updatedAt")}
            for m in metas
            if cwd is None or m.get("cwd") == cwd
        ]  # fmt: skip
        rows.sort(key=lambda r: r.get("updatedAt") or "", reverse=True)
        reply: dict[str, Any] = {"sessions": rows}
        bad = [{"sessionId": u.session_id, "reason": u.reason}
               for u in unreadable if cwd is None or u.cwd == cwd]  # fmt: skip
        if bad:
            reply["_meta"] = {"cleveragents": {"unreadableSessions": bad}}
        return reply

    def _set(self, session: Session, config_id: str, value: Any) -> None:
        if config_id == "mode":
            if value not in BUILTIN_PROFILES:
                raise invalid("params.value", f"unknown mode {value!r}")
            session.meta["mode"] = value
            session.send({"sessionUpdate": "current_mode_update", "currentModeId": value},
                         log=False)  # fmt: skip
        elif config_id == "model":
            if value not in {v for v, _ in self._models(session)}:
                raise invalid("params.value", f"unknown model {value!r}")
            session.meta["model"] = value
        else:
            raise invalid("params.configId", f"unknown config option {config_id!r}")
        self.store.save(session.meta)
        state = self._state(session)
        session.send(
            {"sessionUpdate": "config_option_update", "configOptions": state["configOptions"]},
            log=False,
        )

    async def set_mode(self, params: dict[str, Any]) -> Any:
        session = await self._session(params)
        self._set(session, "mode", params.get("modeId"))
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> Any:
        session = await self._session(params)
        config_id = params.get("configId")
        if not isinstance(config_id, str):
            raise invalid("params.configId", "expected a string")
        self._set(session, config_id, params.get("value"))
        return {"configOptions": self._state(session)["configOptions"]}

    def cancel(self, params: Any) -> None:
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None:
            session.cancel("session/cancel")

    async def prompt(self, params: dict[str, Any]) -> Any:
        session = await self._session(params)
        if session.turn is not None and not session.turn.closed:
            raise RpcError(
                JsonRpcCode.INVALID_REQUEST,
                "invalid request: a prompt is already running in this session",
            )
        blocks: Any = params.get("prompt")
        try:
            text = mp.prompt_text(blocks, session.roots)
        except mp.PromptError as exc:
            raise RpcError(JsonRpcCode.INVALID_PARAMS, str(exc)) from None
        meta = session.meta
        runs: list[str] = meta["runs"]
        command = slash.parse(text)
        if command is not None:  # answered here, never sent to the model
            return await self._command(session, blocks, *command)
        assert self.rpc is not None
        require_model(self.settings.model)  # in an ACP user's words, before any run
        failed: list[str] = meta.setdefault("failed", [])
        goes_on = [run_id for run_id in runs if run_id not in failed]
        request = RunRequest(
            prompt=text, run_id=uuid.uuid4().hex, automation_profile=meta["mode"],
            sandbox_root=session.roots[0], roots=session.roots,
            continue_from=goes_on[-1] if goes_on else None, registry=session.registry,
            ask=session.ask, on_authorized=session.running, pace=self.rpc.pace,
        )  # fmt: skip
        session.turn = Turn(str(request.run_id))
        try:
            handle = await self.service.start(request, session)
        except BaseException:
            session.turn = None
            raise
        for block in blocks:
            # Logged for session/load, not echoed: the client shows its own prompt.
            self.store.append(session.id, {"sessionUpdate": "user_message_chunk", "content": block})
        if meta.get("title") is None:
            meta["title"] = mp.title_of(blocks)
        try:
            result = await handle.result()
        except asyncio.CancelledError:  # $/cancel_request: end the run, then REQUEST_CANCELLED
            handle.cancel("$/cancel_request")
            await handle.wait(timeout=5)
            session.close_turn("cancelled")
            raise
        finally:
            self._used[session.id] = time.monotonic()
            meta["updatedAt"] = _now()
            if session.turn is not None and session.turn.status is not None:
                # Every turn is one /undo and /diff count; a failed one is not gone on from.
                runs.append(handle.run_id)
                if session.turn.status == "failed":
                    failed.append(handle.run_id)
            self.store.save(meta)
        session.close_turn("cancelled" if result.status == "cancelled" else "interrupted")
        if result.status == "failed":
            error = result.error
            code = error.code if error else JsonRpcCode.INTERNAL_ERROR
            raise RpcError(code, error.message if error else "failed")
        return {"stopReason": mp.STOP_REASONS[result.status]}

    async def _command(self, session: Session, blocks: Any, name: str, argument: str) -> Any:
        """A slash command's turn: its reply as the agent's message, logged (as is the
        prompt) for ``session/load``."""
        for block in blocks:
            self.store.append(session.id, {"sessionUpdate": "user_message_chunk", "content": block})
        session.say(await slash.run(session, name, argument))
        session.meta["updatedAt"] = _now()
        self.store.save(session.meta)
        return {"stopReason": "end_turn"}
