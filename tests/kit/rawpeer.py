"""A raw daemon subprocess for tests that must write bytes pytest-lsp would not send."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cleveragents.client._connection import frame, read_frame

LLM_CAPABILITIES = {"experimental": {"cleveragents": {"llm": True}}}
"""Client capabilities that let a run use ``model: "client"`` (the test answers llm/generate)."""


class RawDaemon:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.messages: list[dict[str, Any]] = []

    @classmethod
    async def spawn(
        cls, state_dir: Path, *extra: str, env: dict[str, str] | None = None
    ) -> RawDaemon:
        """A daemon subprocess that has not been initialized yet."""
        import os

        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cleveragents", "serve", "--state-dir", str(state_dir), *extra,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})},
        )  # fmt: skip
        return cls(process)

    @classmethod
    async def start(
        cls,
        workspace: Path,
        state_dir: Path,
        *extra: str,
        capabilities: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> RawDaemon:
        """A daemon subprocess after initialize and initialized."""
        daemon = await cls.spawn(state_dir, *extra, env=env)
        reply = await daemon.call(1, "initialize", {
            "processId": None, "rootUri": workspace.as_uri(), "capabilities": capabilities or {},
            "initializationOptions": {"automationProfile": "trusted", **(options or {})}})  # fmt: skip
        assert "result" in reply, reply
        daemon.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return daemon

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)

    def send(self, message: dict[str, Any]) -> None:
        self.write(frame(message))

    def send_body(self, body: bytes) -> None:
        self.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def next(self, timeout: float = 10) -> dict[str, Any]:
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            message = await read_frame(self.process.stdout)
        assert message is not None, "the daemon closed stdout"
        self.messages.append(message)
        return message

    async def reply_to(self, msg_id: Any, timeout: float = 10) -> dict[str, Any]:
        """The response with this id (notifications before it are kept in ``messages``)."""
        while True:
            message = await self.next(timeout)
            if message.get("id") == msg_id and "method" not in message:
                return message

    async def call(self, msg_id: Any, method: str, params: Any) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await self.reply_to(msg_id)

    async def wait_exit(self, timeout: float = 5) -> int:
        async with asyncio.timeout(timeout):
            return await self.process.wait()

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def stderr(self) -> str:
        """Everything the daemon logged (call after it has exited)."""
        assert self.process.stderr is not None
        return (await self.process.stderr.read()).decode("utf-8", "replace")


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


async def serve(
    daemon: RawDaemon, msg_id: Any, answer: Callable[[str, dict[str, Any]], Any]
) -> dict[str, Any]:
    """Answer the daemon's requests with ``answer(method, params)`` until the reply to
    ``msg_id`` comes; returns that reply."""
    while True:
        message = await daemon.next()
        if "method" in message and "id" in message:
            result = answer(message["method"], message["params"])
            daemon.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif "method" not in message and message.get("id") == msg_id:
            return message
