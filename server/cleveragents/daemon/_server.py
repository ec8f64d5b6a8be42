"""The daemon's methods: the method table mapped to ``RunManager`` calls, the LSP
lifecycle (``initialize``, ``shutdown``, workspace folders, progress cancel), and nothing
more. JSON-RPC itself is the dispatcher's (``_dispatch.py``); framing the transport's.

What of pygls is used, and why (each pinned by ``tests/daemon/test_pygls_pins.py``, so a
pygls upgrade that changes it fails a test rather than the daemon):

- ``pygls.protocol.default_converter``: the lsprotocol cattrs converter with pygls's
  hooks, to read ``InitializeParams`` and write ``InitializeResult`` exactly as LSP says;
- ``pygls.workspace.Workspace``: the workspace folders (``rootUri``/``rootPath``,
  ``workspaceFolders``, ``didChangeWorkspaceFolders``), as pygls's own servers keep them;
- ``pygls.uris.to_fs_path`` / ``from_fs_path``: file URIs to paths and back.

No private pygls name is touched: pygls's JSON-RPC loop is not used at all, because it
drops malformed input, shares one id table between both directions, and lost its
catch-all under our framing.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import cattrs
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import Workspace

from .. import __version__
from ..protocol import PROTOCOL_VERSION, ParamsError, camel, structure, unstructure, wire
from ..protocol import methods as m
from ..rpc import (
    CurrentPeer,
    Dispatcher,
    NotificationHandler,
    NotInitializedError,
    RequestHandler,
    RpcError,
    to_configs,
    to_rpc_error,
)
from ..runs import MAX_TOOL_OUTPUT_BYTES, McpClientSide, RunService, RunSettings
from ..tool import CleverAgentsError, JsonRpcCode, ToolSpec
from ..workspace import ProfileError
from ..workspace.profiles import get_profile
from ..workspace.shell import check_env_names
from ._config import DaemonConfig
from ._elicit import elicitor
from ._mcp import show_document, tools_changed
from ._runs import DaemonRuns

logger = logging.getLogger(__name__)

_lsp = default_converter()  # type: ignore[no-untyped-call]

ROUTES: dict[str, str] = {
    m.TOOLS_REGISTER: "register_tools",
    m.TOOLS_UNREGISTER: "unregister_tools",
    m.TOOLS_LIST: "list_tools",
    m.RUN_START: "start",
    m.RUN_CANCEL: "cancel",
    m.RUN_LIST: "list",
    m.RUN_GET: "get",
    m.RUN_DIFF: "diff",
    m.RUN_REVERT: "revert",
    m.CHECKPOINT_RESTORE: "restore",
    m.MCP_ADD: "mcp_add",
    m.MCP_REMOVE: "mcp_remove",
    m.MCP_SERVERS: "mcp_list",
    m.MCP_LOGIN: "mcp_login",
    m.MCP_LOGOUT: "mcp_logout",
}
"""Each client->daemon request of the method table -> the ``DaemonRuns`` method serving it."""


def _all_optional(cls: type) -> bool:
    return all(f.default is None for f in attrs.fields(cls))


class CleverAgentsServer:
    """The daemon: its configuration, its run service once initialized, and the
    handlers of its methods."""

    def __init__(self, config: DaemonConfig, builtin_tools: list[ToolSpec]) -> None:
        self.config = config
        self.builtin_tools = builtin_tools
        self.peer = CurrentPeer()
        self.client: Dispatcher | None = None
        self.token: str | None = None
        """Set for ``--tcp``: ``initialize`` must present it."""
        self.workspace: Workspace | None = None
        self.on_shell_env: Callable[[list[str]], None] | None = None
        self.runs: DaemonRuns | None = None
        """The requests' target, built with the run service at ``initialize``."""
        self._roots_changing: asyncio.Future[None] | None = None
        """Telling the MCP servers their roots changed (kept: a task must be held)."""
        self.requests: dict[str, RequestHandler] = {
            method.name: self._handler(method) for method in m.METHODS if method.name in ROUTES
        }
        self.notifications: dict[str, NotificationHandler] = {
            lsp.INITIALIZED: lambda _params: None,
            lsp.SET_TRACE: lambda _params: None,
            lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS: self._folders_changed,
            lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL: self._progress_cancel,
            m.LLM_DELTA: self._llm_delta,
        }
        self._optional: dict[str, bool] = {}
        """Whether each method's params may be left out, found at its first message: the
        table's types are built when first used, not at the daemon's start."""

    @property
    def service(self) -> RunService:
        if self.runs is None:
            raise NotInitializedError("the daemon is not initialized (send initialize first)")
        return self.runs.service

    # -- generated request handlers ------------------------------------------------------

    def _handler(self, method: m.Method) -> RequestHandler:
        """Structure params to the table's type, call the runs' method, unstructure the
        result."""
        name = ROUTES[method.name]
        is_async = inspect.iscoroutinefunction(getattr(DaemonRuns, name))

        async def handle(raw: Any) -> Any:
            try:
                typed: Any = structure(raw, method.params)
                if self.runs is None:
                    raise NotInitializedError("the daemon is not initialized")
                impl = getattr(self.runs, name)
                result = (await impl(typed)) if is_async else impl(typed)
            except Exception as exc:  # noqa: BLE001 - the one request error boundary
                raise to_rpc_error(exc) from None
            return unstructure(result) if attrs.has(type(result)) else result

        handle.__name__ = f"handle_{name}"
        return handle

    def all_optional(self, method: str) -> bool:
        known = self._optional.get(method)
        if known is None:
            entry = m.BY_NAME.get(
                method
            )  # a name off the table is never kept: any client sends any
            if entry is None:
                return False
            known = self._optional[method] = _all_optional(entry.params)
        return known

    # -- lifecycle -----------------------------------------------------------------------

    def initialize(self, raw: dict[str, Any], peer: Dispatcher) -> Any:
        """Check the token (TCP), apply ``initializationOptions`` and the client's
        capabilities; a field of the wrong type fails with -32602 naming it."""
        options_raw = raw.get("initializationOptions")
        if self.token is not None:  # --tcp
            import hmac

            given = options_raw.get("token") if isinstance(options_raw, dict) else None
            if not isinstance(given, str) or not hmac.compare_digest(
                given.encode("utf-8", "surrogatepass"), self.token.encode("utf-8")
            ):
                text = "initialize: a valid initializationOptions.token is required"
                raise RpcError(JsonRpcCode.INVALID_REQUEST, text)
        if self.client is not None and self.client is not peer:
            raise RpcError(JsonRpcCode.INVALID_REQUEST, "initialize: another client is connected")
        try:
            params: lsp.InitializeParams = _lsp.structure(raw, lsp.InitializeParams)
        except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
            raise RpcError(JsonRpcCode.INVALID_PARAMS, _lsp_error("params", exc)) from None
        self._apply(params)
        self.client = peer
        self.peer.target = peer
        result = lsp.InitializeResult(
            capabilities=lsp.ServerCapabilities(
                workspace=lsp.WorkspaceOptions(
                    workspace_folders=lsp.WorkspaceFoldersServerCapabilities(
                        supported=True, change_notifications=True
                    )
                ),
                experimental={"cleveragents": unstructure(self.daemon_capabilities())},
            ),
            server_info=lsp.ServerInfo("cleveragents", __version__),
        )
        return _lsp.unstructure(result)

    def _apply(self, params: lsp.InitializeParams) -> None:
        """Check every option first, then build the settings and the run service: a
        refused initialize changes nothing."""
        options, client = _read_options(params)
        custom = _custom_profiles(options)
        _check_options(options, params)
        try:
            mcp_servers = to_configs(options.mcp_servers or [], "initializationOptions.mcpServers")
        except (ParamsError, CleverAgentsError) as exc:
            raise to_rpc_error(exc) from None
        root_uri = params.root_uri
        if root_uri is None and params.root_path:
            root_uri = from_fs_path(params.root_path)
        self.workspace = Workspace(root_uri, workspace_folders=params.workspace_folders or [])
        settings = self._settings(options, custom, mcp_servers)
        window = params.capabilities.window
        show = window.show_document if window is not None else None
        opens_documents = show is not None and show.support is True
        if options.shell_env is not None and self.on_shell_env is not None:
            self.on_shell_env(list(options.shell_env))
        mcp_client = McpClientSide(
            elicit=elicitor(self.peer) if client.elicitation is True else None,
            roots=self.sandbox_roots,
        )
        service = RunService(
            settings, self.builtin_tools, on_tools_changed=tools_changed(self.peer),
            on_authorize=show_document(self.peer, lambda: opens_documents),
            mcp_client=mcp_client,
        )  # fmt: skip
        self.runs = DaemonRuns(
            self.peer, service, self.sandbox_roots,
            permissions=client.permissions is True, llm=client.llm is True,
        )  # fmt: skip

    def _settings(
        self,
        options: wire.InitializationOptions,
        custom: dict[str, Any] | None,
        mcp_servers: list[Any],
    ) -> RunSettings:
        """The command line's settings, each overridden by its initialize option."""
        config = self.config
        state_dir = Path(options.state_dir) if options.state_dir is not None else config.state_dir
        defaults = RunSettings(state_dir=state_dir)
        return RunSettings(
            state_dir=state_dir,
            workspace_folders=tuple(self.sandbox_roots()),
            model=options.model if options.model is not None else config.model,
            automation_profile=options.automation_profile or config.automation_profile,
            custom_profiles=custom or {},
            max_tool_output_bytes=(
                options.max_tool_output_bytes
                if options.max_tool_output_bytes is not None
                else defaults.max_tool_output_bytes
            ),
            shell_env=tuple(options.shell_env or ()),
            checkpoints=options.checkpoints is not False and config.checkpoints,
            instructions=(
                options.instructions if options.instructions is not None else config.instructions
            ),
            # config.toml's servers, each replaced by the client's entry of its name
            mcp_servers=tuple({c.name: c for c in (*config.mcp_servers, *mcp_servers)}.values()),
        )

    async def shutdown(self) -> None:
        # End the runs first, so each run/start is answered with its result before the
        # shutdown reply.
        if self.runs is not None:
            await self.runs.service.aclose()

    async def close(self, reason: str = "end of input") -> None:
        """The client is gone: end its runs, stop what the daemon started for it (its
        MCP servers, the model clients' connections)."""
        if self.runs is not None:
            await self.runs.service.aclose(timeout=5.0, reason=reason)

    def daemon_capabilities(self) -> wire.DaemonCapabilities:
        return wire.DaemonCapabilities(
            PROTOCOL_VERSION,
            [method.name for method in m.METHODS],
            [spec.name for spec in self.builtin_tools],
        )

    def sandbox_roots(self) -> list[str]:
        """The workspace folders as absolute paths, first one first."""
        workspace = self.workspace
        if workspace is None:
            raise NotInitializedError("no workspace before initialize")
        roots = [to_fs_path(folder.uri) for folder in workspace.folders.values()]
        if not roots and workspace.root_uri:
            roots = [to_fs_path(workspace.root_uri)]
        return [str(Path(root).resolve()) for root in roots if root]

    # -- notifications -------------------------------------------------------------------

    def _folders_changed(self, raw: Any) -> None:
        try:
            params: lsp.DidChangeWorkspaceFoldersParams = _lsp.structure(
                raw, lsp.DidChangeWorkspaceFoldersParams
            )
        except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
            logger.warning("ignored didChangeWorkspaceFolders: %s", _lsp_error("params", exc))
            return
        if self.workspace is None:
            return
        for folder in params.event.removed:
            self.workspace.remove_folder(folder.uri)
        for folder in params.event.added:
            self.workspace.add_folder(folder)
        if self.runs is not None:  # MCP servers hear of their new roots
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # called off the daemon's loop: no server is connected
                return
            self._roots_changing = loop.create_task(self.runs.service.roots_changed())

    def _progress_cancel(self, raw: Any) -> None:
        token = raw.get("token") if isinstance(raw, dict) else None
        if isinstance(token, (str, int)) and not isinstance(token, bool) and self.runs:
            self.runs.progress_cancel(token)

    def _llm_delta(self, raw: Any) -> None:
        try:
            params = structure(raw, wire.LlmDeltaNotification)
        except ParamsError as exc:
            logger.debug("ignored llm/delta: %s", exc)
            return
        if self.runs is not None:
            self.runs.llm_delta(params)


def _read_options(
    params: lsp.InitializeParams,
) -> tuple[wire.InitializationOptions, wire.ClientCapabilitiesCleverAgents]:
    """``initializationOptions`` and our experimental client capabilities, typed; a field
    of the wrong type is -32602 naming it."""
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
        raise RpcError(JsonRpcCode.INVALID_PARAMS, str(exc)) from None
    return options, client


def _custom_profiles(options: wire.InitializationOptions) -> dict[str, Any] | None:
    """The client's own profiles, each checked now rather than at the first run."""
    if options.profiles is None:
        return None
    custom = {
        name: {
            "read": p.read, "write": p.write, "execute": p.execute,
            "requires_confined_shell": bool(p.requires_confined_shell),
            "never_ask": bool(p.never_ask), "unconfined_root": bool(p.unconfined_root),
            "description": p.description or "",
        }
        for name, p in options.profiles.items()
    }  # fmt: skip
    try:
        for name in custom:
            get_profile(name, custom)
    except ProfileError as exc:
        raise RpcError(exc.code, exc.message) from None
    return custom


def _check_options(options: wire.InitializationOptions, params: lsp.InitializeParams) -> None:
    """The shell environment names, the output cap and every path the daemon will open."""
    if options.shell_env is not None:
        try:
            check_env_names(options.shell_env)
        except ValueError as exc:
            text = f"initializationOptions.shellEnv: {exc}"
            raise RpcError(JsonRpcCode.INVALID_PARAMS, text) from None
    cap = options.max_tool_output_bytes
    if cap is not None and not 1 <= cap <= MAX_TOOL_OUTPUT_BYTES:
        text = (
            "initializationOptions.maxToolOutputBytes: must be from 1 to "
            f"{MAX_TOOL_OUTPUT_BYTES} (16 MiB), so that every record fits one frame"
        )
        raise RpcError(JsonRpcCode.INVALID_PARAMS, text)
    if options.state_dir is not None:
        _check_path(options.state_dir, "initializationOptions.stateDir")
    if params.root_uri is not None:
        _check_path(to_fs_path(params.root_uri) or "", "rootUri")
    if params.root_path is not None:
        _check_path(params.root_path, "rootPath")
    for index, folder in enumerate(params.workspace_folders or []):
        _check_path(to_fs_path(folder.uri) or "", f"workspaceFolders[{index}].uri")


def _check_path(path: str, field: str) -> None:
    """A path the daemon will open: NUL and control characters are refused here (-32602)
    rather than failing later, inside a run, as an internal error."""
    if any(ord(c) < 32 for c in path):
        raise RpcError(
            JsonRpcCode.INVALID_PARAMS, f"{field}: must not hold NUL or control characters"
        )
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise RpcError(
            JsonRpcCode.INVALID_PARAMS, f"{field}: invalid Unicode (a lone surrogate)"
        ) from None


def _lsp_error(root: str, exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        messages = cattrs.transform_error(exc, path=root)
        if messages:
            text, _, path = messages[0].rpartition(" @ ")
            return f"{camel(path)}: {text}"
    return f"{root}: invalid"
