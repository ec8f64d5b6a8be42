"""The real server behind the real dispatcher, in process: ``Dispatcher.receive(bytes)``
is the same code path as the daemon subprocess, without the subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cleveragents.daemon import create_server
from cleveragents.daemon._dispatch import Dispatcher


class Sink:
    """Keeps every frame the daemon writes, parsed (what it writes is always JSON)."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        _, _, body = data.partition(b"\r\n\r\n")
        self.frames.append(json.loads(body))

    async def pace(self) -> None:
        return None

    def replies(self, msg_id: Any) -> list[dict[str, Any]]:
        return [
            f for f in self.frames if "method" not in f and f.get("id") == msg_id
            and type(f.get("id")) is type(msg_id)
        ]  # fmt: skip

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [f["params"] for f in self.frames if f.get("method") == method]


def body(message: Any) -> bytes:
    return json.dumps(message).encode()


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
