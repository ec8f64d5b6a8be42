"""The real server behind the real dispatcher, in process: ``Dispatcher.receive(bytes)``
is the same code path as the daemon subprocess, without the subprocess. Also a fake
peer for driving ``RunManager`` with no dispatcher at all."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cleveragents.daemon import create_server
from cleveragents.rpc._dispatch import Dispatcher

from .rawpeer import body


class Sink:
    """Keeps every frame the daemon writes, parsed (what it writes is always JSON)."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        _, _, payload = data.partition(b"\r\n\r\n")
        self.frames.append(json.loads(payload))

    async def pace(self) -> None:
        return None

    def replies(self, msg_id: Any) -> list[dict[str, Any]]:
        return [
            f for f in self.frames if "method" not in f and f.get("id") == msg_id
            and type(f.get("id")) is type(msg_id)
        ]  # fmt: skip

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [f["params"] for f in self.frames if f.get("method") == method]


async def in_process_daemon(
    tmp_path: Path, options: dict[str, Any] | None = None, sink: Any = None
) -> tuple[Dispatcher, Any]:
    """An initialized daemon whose workspace folder is ``tmp_path / "ws"``."""
    server = create_server(tmp_path / "state")
    sink = sink if sink is not None else Sink()
    dispatcher = Dispatcher(server, sink)
    (tmp_path / "ws").mkdir(exist_ok=True)
    params: dict[str, Any] = {"processId": None, "capabilities": {},
                              "rootUri": (tmp_path / "ws").as_uri()}  # fmt: skip
    if options is not None:
        params["initializationOptions"] = options
    dispatcher.receive(body({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                             "params": params}))  # fmt: skip
    assert "result" in sink.replies("init")[0]
    return dispatcher, sink


class FakePeer:
    """What ``RunManager`` talks to: keeps notifications, answers each tool call with its
    arguments."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, dict[str, Any]]] = []

    def notify_json(self, method: str, params_text: str) -> None:
        self.notifications.append((method, json.loads(params_text)))

    def request(self, method: str, params: dict[str, Any]) -> tuple[str, asyncio.Future[Any]]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result({"output": params["arguments"]})
        return "id", future

    def cancel_request(self, msg_id: str, extra: dict[str, Any] | None = None) -> None:
        pass

    def progress(self, token: str | int, kind: str, message: str, percentage: int | None) -> None:
        pass

    async def pace(self) -> None:
        pass
