"""The pygls server: the method table mapped to ``RunManager`` calls, and nothing more.

Three pieces of pygls are adjusted here, each for a measured reason (see
``shared/notes/pygls-and-pytest-lsp.md``):

- params of custom methods stay plain dicts (pygls would make namedtuples), and are
  structured inside the handler so that bad params get -32602 naming the field;
- errors cross to the wire in one place (``_wire_error``), without tracebacks;
- a reply to a server->client request that was already cancelled is ignored (#621).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcMethodNotFound
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
    lsp_method,
)
from pygls.uris import to_fs_path

from .. import __version__
from ..protocol import (
    PROTOCOL_VERSION,
    ParamsError,
    dumps,
    encode_frame,
    structure,
    unstructure,
    wire,
)
from ..protocol import methods as m
from ..tool import CleverAgentsError, NotInitializedError, ProfileError, ToolSpec
from ..workspace.profiles import get_profile
from ._peer import PeerRequestError
from ._permissions import make_policy_factory
from ._runs import DaemonConfig, RunManager
from ._transcripts import TranscriptStore

logger = logging.getLogger(__name__)

P = TypeVar("P")

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class WireError(Exception):
    """An error reply: code and message, never a traceback."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _wire_error(exc: BaseException) -> WireError:
    """The one exception-to-wire boundary of the daemon."""
    if isinstance(exc, WireError):
        return exc
    if isinstance(exc, ParamsError):
        return WireError(INVALID_PARAMS, str(exc))
    if isinstance(exc, CleverAgentsError):
        return WireError(exc.code, exc.message)
    logger.error("internal error", exc_info=exc)
    return WireError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}")


def _plain_params(obj: dict[str, Any], cls: type[Any]) -> Any:
    return cls(**obj)  # keep params (and results) as the plain JSON the peer sent


def _converter() -> Any:
    converter = default_converter()  # type: ignore[no-untyped-call]
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        converter.register_structure_hook(cls, _plain_params)
    return converter


class CleverAgentsProtocol(LanguageServerProtocol):
    """LSP protocol with our error boundary, plain params and cleveragents capabilities."""

    _server: CleverAgentsServer

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self._ids = itertools.count(1)

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams) -> Any:
        self._server.on_initialize(params)  # may refuse bad options before anything else
        result = yield from super().lsp_initialize(params)
        ours = unstructure(self._server.daemon_capabilities())
        result.capabilities.experimental = {"cleveragents": ours}
        # Not a text-document server: advertise no document sync, so that stock LSP
        # clients do not start sending didOpen/didChange.
        result.capabilities.text_document_sync = None
        return result

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        if not future.cancelled() and isinstance(future.exception(), WireError):
            self._request_futures.pop(msg_id, None)
            error = future.exception()
            self._send_response(msg_id, error=lsp.ResponseError(error.code, error.message))
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """A reply to one of our requests; ``error`` is a dict (from our transport) or
        pygls's ``ResponseError``."""
        future = self._request_futures.pop(msg_id, None)
        if future is None or future.done():  # pygls #621: the awaiting task was cancelled
            return
        if error is not None:
            if isinstance(error, dict):
                code, message = error.get("code"), error.get("message")
            else:
                code, message = error.code, error.message
            future.set_exception(
                PeerRequestError(code if isinstance(code, int) else -32603, str(message))
            )
        else:
            future.set_result(result)

    # The hot paths below write frames themselves: pygls's ``_send_data`` wraps each
    # message in an attrs object that cattrs then walks field by field (measured: about
    # half the cost of a notification; scripts/bench/daemon_notifications.py).

    def write_frame(self, body: str) -> None:
        writer = self.writer
        if writer is not None:
            writer.write(encode_frame(body))

    def notify_json(self, method: str, params_text: str) -> None:
        self.write_frame(f'{{"jsonrpc":"2.0","method":{dumps(method)},"params":{params_text}}}')

    def request(self, method: str, params: dict[str, Any]) -> tuple[str, asyncio.Future[Any]]:
        msg_id = f"ca-{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._request_futures[msg_id] = future  # type: ignore[assignment]
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        self.write_frame(dumps(message))
        return msg_id, future

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if error is None and not attrs.has(type(result)):
            try:
                body = dumps({"jsonrpc": "2.0", "id": msg_id, "result": result})
            except (TypeError, ValueError):
                pass  # not plain JSON: let pygls serialise it
            else:
                self.write_frame(body)
                return
        super()._send_response(msg_id, result, error)

    def cancel_request(self, msg_id: str) -> None:
        if self._request_futures.pop(msg_id, None) is not None:
            self.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id=msg_id))


class CleverAgentsServer(LanguageServer):
    """The daemon. ``manager`` owns the runs; this class only wires methods to it."""

    protocol: CleverAgentsProtocol

    def __init__(
        self,
        config: DaemonConfig,
        builtin_tools: list[ToolSpec],
    ) -> None:
        super().__init__(
            "cleveragents", __version__, protocol_cls=CleverAgentsProtocol,
            converter_factory=_converter, text_document_sync_kind=lsp.TextDocumentSyncKind.None_,
        )  # fmt: skip
        self.config = config
        self.initialized = False
        peer = _PygslPeer(self)
        self.manager = RunManager(peer, config, builtin_tools, make_policy_factory(config, peer))
        _register_methods(self)

    def on_initialize(self, params: lsp.InitializeParams) -> None:
        """Apply ``initializationOptions`` and the client's capabilities; a field of the
        wrong type fails ``initialize`` with -32602 naming it."""
        try:
            raw_options = params.initialization_options
            options = structure(
                raw_options if raw_options is not None else {},
                wire.InitializationOptions,
                root="initializationOptions",
            )
            experimental = params.capabilities.experimental
            ours = experimental.get("cleveragents") if isinstance(experimental, dict) else None
            client = structure(
                ours if ours is not None else {},
                wire.ClientCapabilitiesCleverAgents,
                root="capabilities.experimental.cleveragents",
            )
        except ParamsError as exc:
            raise WireError(INVALID_PARAMS, str(exc)) from None
        if options.model is not None:
            self.config.model = options.model
        if options.automation_profile is not None:
            self.config.automation_profile = options.automation_profile
        if options.state_dir is not None:
            self.config.state_dir = Path(options.state_dir)
            self.manager.store = TranscriptStore(self.config.state_dir)
        if options.profiles is not None:
            custom = {
                name: {
                    "read": p.read, "write": p.write, "execute": p.execute,
                    "requires_confined_shell": bool(p.requires_confined_shell),
                    "never_ask": bool(p.never_ask), "description": p.description or "",
                }
                for name, p in options.profiles.items()
            }  # fmt: skip
            try:
                for name in custom:  # refuse a bad profile now, not at the first run
                    get_profile(name, custom)
            except ProfileError as exc:
                raise WireError(exc.code, exc.message) from None
            self.config.custom_profiles = custom
        self.config.client_permissions = client.permissions is True
        self.config.client_llm = client.llm is True
        self.initialized = True

    def daemon_capabilities(self) -> wire.DaemonCapabilities:
        return wire.DaemonCapabilities(
            PROTOCOL_VERSION, [method.name for method in m.METHODS], self.manager.builtin_names
        )

    def sandbox_roots(self) -> list[str]:
        """The workspace folders as absolute paths, first one first."""
        workspace = self.workspace
        roots = [to_fs_path(folder.uri) for folder in workspace.folders.values()]
        if not roots and workspace.root_uri:
            roots = [to_fs_path(workspace.root_uri)]
        return [str(Path(root).resolve()) for root in roots if root]

    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, JsonRpcMethodNotFound):
            return  # answered with -32601 already; not a fault of the daemon
        logger.error("server error (%s): %s", getattr(source, "__name__", source), error)


class _PygslPeer:
    """``Peer`` over the pygls protocol."""

    def __init__(self, server: CleverAgentsServer) -> None:
        self._server = server

    def notify_json(self, method: str, params_text: str) -> None:
        self._server.protocol.notify_json(method, params_text)

    def request(self, method: str, params: dict[str, Any]) -> tuple[str, asyncio.Future[Any]]:
        return self._server.protocol.request(method, params)

    def cancel_request(self, msg_id: str) -> None:
        self._server.protocol.cancel_request(msg_id)

    def progress(self, token: str | int, kind: str, message: str, percentage: int | None) -> None:
        progress = self._server.work_done_progress
        if kind == "begin":
            progress.begin(
                token,
                lsp.WorkDoneProgressBegin(
                    "cleveragents run", cancellable=True, message=message, percentage=0
                ),
            )
        elif kind == "report":
            progress.report(
                token, lsp.WorkDoneProgressReport(message=message, percentage=percentage)
            )
        else:
            progress.end(token, lsp.WorkDoneProgressEnd(message=message))


# -- the method table -> RunManager ------------------------------------------------------


Handler = Callable[[CleverAgentsServer, Any], Awaitable[Any]]


def _method(server: CleverAgentsServer, name: str, params_type: type[P]) -> Callable[
    [Callable[[P], Awaitable[Any]]], None
]:  # fmt: skip
    """Register a handler: structure params, require initialize, map errors, unstructure."""

    def decorate(impl: Callable[[P], Awaitable[Any]]) -> None:
        @functools.wraps(impl)
        async def handler(raw: Any) -> Any:
            try:
                if not server.initialized:
                    raise NotInitializedError(f"{name} before initialize")
                params = structure(raw, params_type)
                result = await impl(params)
                return unstructure(result) if attrs.has(type(result)) else result
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the one request error boundary
                raise _wire_error(exc) from None

        server.feature(name)(handler)

    return decorate


def _register_methods(server: CleverAgentsServer) -> None:
    manager = server.manager

    @_method(server, m.TOOLS_REGISTER, wire.RegisterToolsParams)
    async def tools_register(params: wire.RegisterToolsParams) -> Any:
        return manager.register_tools(params)

    @_method(server, m.TOOLS_UNREGISTER, wire.UnregisterToolsParams)
    async def tools_unregister(params: wire.UnregisterToolsParams) -> Any:
        return manager.unregister_tools(params)

    @_method(server, m.TOOLS_LIST, wire.ListToolsParams)
    async def tools_list(params: wire.ListToolsParams) -> Any:
        return manager.list_tools(params)

    @_method(server, m.RUN_START, wire.RunParams)
    async def run_start(params: wire.RunParams) -> Any:
        prepared = await manager.prepare(params, server.sandbox_roots())
        run, runtime, context, history, limit = prepared
        task = asyncio.ensure_future(manager.run(run, runtime, context, history, limit))
        run.task = task
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:  # $/cancelRequest: stop the run, then answer -32800
            run.cancel.cancel("$/cancelRequest")
            await asyncio.wait([task], timeout=5)
            raise

    @_method(server, m.RUN_CANCEL, wire.RunIdParams)
    async def run_cancel(params: wire.RunIdParams) -> Any:
        manager.cancel(params.run_id)
        return {}

    @_method(server, m.RUN_LIST, wire.EmptyParams)
    async def run_list(params: wire.EmptyParams) -> Any:
        return {"runs": await manager.list()}

    @_method(server, m.RUN_GET, wire.RunIdParams)
    async def run_get(params: wire.RunIdParams) -> Any:
        return await manager.get(params.run_id)

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(params: Any) -> None:
        # End the runs first, so each run/start is answered with its result before the
        # shutdown reply (pygls would otherwise cancel the pending requests outright).
        await manager.cancel_all(timeout=2.0)

    @server.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(params: lsp.WorkDoneProgressCancelParams) -> None:
        # The progress is advertised as cancellable: its cancel button cancels the run.
        for run in list(manager.active.values()):
            if run.work_done_token is not None and run.work_done_token == params.token:
                run.cancel.cancel("window/workDoneProgress/cancel")

    @server.feature(m.LLM_DELTA)
    def llm_delta(raw: Any) -> None:
        if isinstance(raw, dict):
            run = manager.active.get(str(raw.get("runId")))
            text, iteration = raw.get("text"), raw.get("iteration")
            if (
                run is not None
                and run.on_llm_delta
                and isinstance(text, str)
                and isinstance(iteration, int)
            ):
                run.on_llm_delta(iteration, text)
