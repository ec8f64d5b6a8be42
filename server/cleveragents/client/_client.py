"""``Client``: spawn ``cleveragents serve``, register Python tools, run, stream events.

async with await Client.spawn(workspace="/path/to/project", model="scripted:turns.json") as client:
    await client.register_tool("client/greet", "Greet someone.", {"type": "object"}, greet)
    result = await client.run("Say hello", on_event=print)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from ..protocol import methods as m
from ._connection import Connection, HandlerError, RpcError

ToolFunction = Callable[[dict[str, Any]], Any | Awaitable[Any]]
EventCallback = Callable[[str, dict[str, Any]], None]
PermissionCallback = Callable[[dict[str, Any]], str | Awaitable[str]]
LlmCallback = Callable[[dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]]
"""Answers ``llm/generate`` params with ``{content, toolCalls, usage?}``."""

RUN_EVENTS = frozenset(
    {m.RUN_STARTED, m.RUN_MESSAGE_DELTA, m.RUN_TOOL_CALL_STARTED, m.RUN_TOOL_CALL,
     m.RUN_ITERATION, m.RUN_FINISHED}
)  # fmt: skip


class Client:
    """A connection to one spawned daemon. Many runs may go on at once."""

    def __init__(self, process: asyncio.subprocess.Process, connection: Connection) -> None:
        self.process = process
        self.connection = connection
        self.capabilities: dict[str, Any] = {}
        self._tools: dict[str, ToolFunction] = {}
        self._run_listeners: dict[str, list[EventCallback]] = {}
        self._any_listeners: list[EventCallback] = []
        self.permission_handler: PermissionCallback | None = None
        self.llm_handler: LlmCallback | None = None
        connection.notification_handlers.append(self._on_notification)
        connection.handle(m.TOOLS_CALL, self._on_tools_call)
        connection.handle(m.PERMISSION_REQUEST, self._on_permission)
        connection.handle(m.LLM_GENERATE, self._on_llm_generate)

    @classmethod
    async def spawn(
        cls,
        workspace: str | Path,
        *,
        model: str | Mapping[str, Any] | None = None,
        state_dir: str | Path | None = None,
        automation_profile: str | None = None,
        permissions: bool = False,
        llm: bool = False,
        extra_folders: tuple[str | Path, ...] = (),
        command: list[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Client:
        """Start ``cleveragents serve`` and complete ``initialize``."""
        argv = command or [sys.executable, "-m", "cleveragents", "serve"]
        if state_dir is not None:
            argv = [*argv, "--state-dir", str(state_dir)]
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})}, limit=64 * 1024 * 1024,
        )  # fmt: skip
        assert process.stdin is not None
        assert process.stdout is not None
        connection = Connection(process.stdout, process.stdin)
        connection.start()
        client = cls(process, connection)
        # One resolve per folder at spawn time; not worth a thread hop.
        folders = [Path(p).resolve() for p in (workspace, *extra_folders)]  # noqa: ASYNC240
        options: dict[str, Any] = {}
        if model is not None:
            options["model"] = model
        if automation_profile is not None:
            options["automationProfile"] = automation_profile
        try:
            result = await connection.request(
                "initialize",
                {
                    "processId": os.getpid(),
                    "rootUri": folders[0].as_uri(),
                    "workspaceFolders": [{"uri": f.as_uri(), "name": f.name} for f in folders],
                    "capabilities": {
                        "experimental": {"cleveragents": {"permissions": permissions, "llm": llm}}
                    },
                    "initializationOptions": options,
                },
            )
        except BaseException:
            await client.close()
            raise
        client.capabilities = result["capabilities"]["experimental"]["cleveragents"]
        connection.notify("initialized", {})
        return client

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- tools -------------------------------------------------------------------------

    async def register_tool(
        self,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        function: ToolFunction,
        *,
        annotations: Mapping[str, bool] | None = None,
        timeout_ms: int | None = None,
        run_id: str | None = None,
        replace: bool = False,
    ) -> None:
        definition: dict[str, Any] = {
            "name": name, "description": description, "inputSchema": dict(input_schema),
        }  # fmt: skip
        if annotations:
            definition["annotations"] = dict(annotations)
        if timeout_ms is not None:
            definition["timeoutMs"] = timeout_ms
        params: dict[str, Any] = {"tools": [definition]}
        if run_id is not None:
            params["runId"] = run_id
        if replace:
            params["replace"] = True
        self._tools[name] = function
        await self.connection.request(m.TOOLS_REGISTER, params)

    async def list_tools(self) -> list[dict[str, Any]]:
        result = await self.connection.request(m.TOOLS_LIST, {})
        return list(result["tools"])

    async def _on_tools_call(self, params: dict[str, Any]) -> Any:
        function = self._tools.get(str(params.get("name")))
        if function is None:
            raise HandlerError(-32601, f"no client tool {params.get('name')!r}")
        arguments = dict(params.get("arguments") or {})
        try:
            output = function(arguments)
            if asyncio.iscoroutine(output) or isinstance(output, asyncio.Future):
                output = await output
        except Exception as exc:  # noqa: BLE001 - a failing tool is a failed record, by design
            return {"output": f"{type(exc).__name__}: {exc}", "isError": True}
        return {"output": output}

    async def _on_permission(self, params: dict[str, Any]) -> Any:
        if self.permission_handler is None:
            return {"outcome": "reject_once"}
        outcome = self.permission_handler(params)
        if not isinstance(outcome, str):
            outcome = await outcome
        return {"outcome": outcome}

    async def _on_llm_generate(self, params: dict[str, Any]) -> Any:
        if self.llm_handler is None:
            raise HandlerError(-32601, "this client lends no model (llm_handler is not set)")
        reply = self.llm_handler(params)
        if not isinstance(reply, dict):
            reply = await reply
        return reply

    def send_llm_delta(self, run_id: str, iteration: int, text: str) -> None:
        """Stream text of the lent model while answering ``llm/generate``."""
        self.connection.notify(m.LLM_DELTA, {"runId": run_id, "iteration": iteration, "text": text})

    # -- runs --------------------------------------------------------------------------

    def on_event(self, callback: EventCallback) -> None:
        """Receive every run notification of this connection."""
        self._any_listeners.append(callback)

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method not in RUN_EVENTS:
            return
        for callback in self._any_listeners:
            callback(method, params)
        for callback in self._run_listeners.get(str(params.get("runId")), ()):
            callback(method, params)

    async def run(
        self, prompt: str, *, on_event: EventCallback | None = None, **params: Any
    ) -> dict[str, Any]:
        """Start a run and wait for its ``RunResult``. ``params`` are RunParams fields in
        camelCase (``maxIterations=3``). Cancelling the awaiting task cancels the run."""
        run_id = params.setdefault("runId", os.urandom(8).hex())
        if on_event is not None:
            self._run_listeners.setdefault(run_id, []).append(on_event)
        try:
            result: dict[str, Any] = await self.connection.request(
                m.RUN_START, {"prompt": prompt, **params}
            )
            return result
        finally:
            self._run_listeners.pop(run_id, None)

    async def cancel(self, run_id: str) -> None:
        await self.connection.request(m.RUN_CANCEL, {"runId": run_id})

    async def get(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.connection.request(m.RUN_GET, {"runId": run_id})
        return result

    async def list_runs(self) -> list[dict[str, Any]]:
        return list((await self.connection.request(m.RUN_LIST, {}))["runs"])

    async def close(self, timeout: float = 5.0) -> int | None:
        """``shutdown`` + ``exit`` when possible, then wait for the process (bounded)."""
        if self.process.returncode is None and not self.connection.closed.is_set():
            with contextlib.suppress(RpcError, ConnectionError, TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.connection.request("shutdown")
                self.connection.notify("exit", {})
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        await self.connection.close()
        return self.process.returncode
