"""The real ``cleveragents serve`` subprocess driven by pytest-lsp (tests/daemon's
``session`` fixture builds on it).

``session`` is an initialized client with one workspace folder and its own state dir.
It collects every run notification in wire order, answers ``tools/call`` from the
test's ``tool_handlers`` and ``permission/request`` from ``permission_answers``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    default_converter,
)
from pytest_lsp import LanguageClient
from pytest_lsp.client import register_lsp_features

from cleveragents.protocol import methods as m

RUN_EVENTS = tuple(method.name for method in m.RUN_EVENTS.values())

SERVE = [sys.executable, "-m", "cleveragents", "serve"]


class DeliberateError(JsonRpcException):
    """Raised by a test's handler to answer a daemon request with an error."""


class TestClient(LanguageClient):
    __test__ = False

    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, DeliberateError):
            return
        super().report_server_error(error, source)


class Session:
    """What a test drives: the pytest-lsp client plus what the daemon sent."""

    def __init__(self, client: LanguageClient, workspace: Path, state_dir: Path) -> None:
        self.client = client
        self.workspace = workspace
        self.state_dir = state_dir
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.permission_requests: list[dict[str, Any]] = []
        self.cancelled_requests: list[Any] = []
        self.tool_handlers: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {}
        self.permission_answers: list[str] = []
        self.permission_asked = asyncio.Event()
        self.capabilities: dict[str, Any] = {}
        self._waiters: list[tuple[Callable[[str, dict[str, Any]], bool], asyncio.Event]] = []

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        async with asyncio.timeout(20):
            return await self.client.protocol.send_request_async(method, params)

    def start(self, prompt: str = "go", **params: Any) -> asyncio.Future[Any]:
        """Send run/start without waiting; the future resolves with the RunResult."""
        return asyncio.ensure_future(self.request(m.RUN_START, {"prompt": prompt, **params}))

    def for_run(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        return [(method, p) for method, p in self.events if p.get("runId") == run_id]

    async def wait_for(
        self, predicate: Callable[[str, dict[str, Any]], bool], timeout: float = 10
    ) -> None:
        if any(predicate(method, p) for method, p in self.events):
            return
        event = asyncio.Event()
        self._waiters.append((predicate, event))
        async with asyncio.timeout(timeout):
            await event.wait()

    def record(self, method: str, params: dict[str, Any]) -> None:
        self.events.append((method, params))
        for predicate, event in list(self._waiters):
            if predicate(method, params):
                event.set()
                self._waiters.remove((predicate, event))


def _plain_params(obj: dict[str, Any], cls: type[Any]) -> Any:
    return cls(**obj)  # keep params (and results) as the plain JSON the daemon sent


def _converter() -> Any:
    """pytest-lsp's converter, but custom methods' params stay plain dicts (pygls would
    make namedtuples of them)."""
    converter = default_converter()  # type: ignore[no-untyped-call]
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        converter.register_structure_hook(cls, _plain_params)
    return converter


def make_client() -> LanguageClient:
    client = TestClient(converter_factory=_converter)
    register_lsp_features(client)
    return client


def initialize_params(workspace: Path, state_dir: Path, **options: Any) -> lsp.InitializeParams:
    experimental = options.pop("experimental", {"cleveragents": {"permissions": True}})
    return lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(experimental=experimental),
        root_uri=workspace.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name="workspace")],
        initialization_options={"stateDir": str(state_dir), "automationProfile": "trusted",
                                **options},
    )  # fmt: skip


def attach(client: LanguageClient, session: Session) -> None:
    for method in (*RUN_EVENTS, m.TOOLS_CHANGED):
        client.feature(method)(lambda params, method=method: session.record(method, params))

    @client.feature(m.TOOLS_CALL)
    async def tools_call(params: dict[str, Any]) -> Any:
        session.tool_calls.append(params)
        handler = session.tool_handlers.get(params["name"])
        if handler is None:
            return {"output": f"echo {params['arguments']}"}
        return await handler(params)

    @client.feature(m.PERMISSION_REQUEST)
    async def permission(params: dict[str, Any]) -> Any:
        session.permission_requests.append(params)
        session.permission_asked.set()
        answer = session.permission_answers.pop(0) if session.permission_answers else "allow_once"
        if answer == "hang":
            await asyncio.sleep(30)
        return {"outcome": answer}
