"""A small ACP client for the tests: the real ``cleveragents serve --protocol acp``
subprocess, newline-delimited JSON on its pipes, every line kept in order."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cleveragents.tool import JsonRpcCode

RequestHandler = Callable[[str, Any], Awaitable[Any]]
Spawn = Callable[..., Awaitable["AcpClient"]]
"""The ``spawn`` fixture: ``await spawn(model, *serve_flags, **client_capabilities)``."""


def serve_command(model: Any, state_dir: Path, *extra: str) -> list[str]:
    spec = model if isinstance(model, str) else json.dumps(model)
    return [
        sys.executable, "-m", "cleveragents", "serve", "--protocol", "acp",
        "--model", spec, "--state-dir", str(state_dir), *extra,
    ]  # fmt: skip


class AcpClient:
    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[dict[str, Any]] = []
        """Every message from the agent, in wire order."""
        self.on_request: RequestHandler = self._no_handler
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = 0
        self._changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self.stdout_junk: list[bytes] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> AcpClient:
        self.proc = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=64 * 1024 * 1024,
        )  # fmt: skip
        self._reader = asyncio.ensure_future(self._read())
        return self

    @staticmethod
    async def _no_handler(method: str, params: Any) -> Any:
        raise AssertionError(f"unexpected request {method}")

    async def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        while True:
            raw = await self.proc.stdout.readline()
            if not raw:
                break
            try:
                message = json.loads(raw)
            except ValueError:
                self.stdout_junk.append(raw)
                continue
            self.lines.append(message)
            self._changed.set()
            if "method" in message and "id" in message:
                task = asyncio.ensure_future(self._answer(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif "method" not in message and message.get("id") in self._pending:
                future = self._pending.pop(message["id"])
                if not future.done():
                    future.set_result(message)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the agent closed its output"))

    async def _answer(self, message: dict[str, Any]) -> None:
        try:
            result = await self.on_request(message["method"], message.get("params"))
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        except Exception as exc:  # noqa: BLE001 - answered as an error
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "error": {"code": JsonRpcCode.INTERNAL_ERROR, "message": str(exc)}}  # fmt: skip
        self.send(reply)

    def send(self, message: Any) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def write(self, data: bytes) -> None:
        assert self.proc is not None
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    def start_request(self, method: str, params: Any) -> tuple[int, asyncio.Future[Any]]:
        self._ids += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = future
        self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids, future

    async def raw_request(self, method: str, params: Any, timeout: float = 10) -> dict[str, Any]:
        """The whole reply message (result or error)."""
        _, future = self.start_request(method, params)
        async with asyncio.timeout(timeout):
            reply: dict[str, Any] = await future
        return reply

    async def request(self, method: str, params: Any, timeout: float = 10) -> Any:
        reply = await self.raw_request(method, params, timeout)
        assert "error" not in reply, reply
        return reply["result"]

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10
    ) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                for message in self.lines:
                    if predicate(message):
                        return message
                self._changed.clear()
                await self._changed.wait()

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        return [
            line["params"]["update"]
            for line in self.lines
            if line.get("method") == "session/update"
            and (session_id is None or line["params"]["sessionId"] == session_id)
        ]

    async def initialize(self, **capabilities: Any) -> Any:
        return await self.request(
            "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities}
        )

    async def new_session(self, cwd: Path, **extra: Any) -> Any:
        return await self.request("session/new", {"cwd": str(cwd), "mcpServers": [], **extra})

    async def prompt(self, session_id: str, text: str, timeout: float = 15) -> Any:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.request("session/prompt", params, timeout)

    async def close(self) -> int:
        proc = self.proc
        if proc is None:
            return 0
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            async with asyncio.timeout(10):
                code = await proc.wait()
        except TimeoutError:
            proc.kill()
            code = await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 5)
        return code


def tool_updates(updates: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """toolCallId -> its tool_call and tool_call_update payloads, in order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            out.setdefault(update["toolCallId"], []).append(update)
    return out
