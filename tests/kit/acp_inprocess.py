"""The real ACP agent behind the real dispatcher, in process: ``receive(line)`` is the
code path of ``serve --protocol acp`` without the subprocess (for fuzzing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cleveragents.acp import AcpAgent, create_agent
from cleveragents.acp._rpc import AcpDispatcher


class LineSink:
    """Keeps every line the agent writes, parsed (what it writes is always JSON)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        for line in data.splitlines():
            self.messages.append(json.loads(line))

    async def pace(self) -> None:
        return None

    def replies(self, msg_id: Any) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" not in m and m.get("id") == msg_id]


class InProcessAgent:
    def __init__(self, agent: AcpAgent, dispatcher: AcpDispatcher, sink: LineSink) -> None:
        self.agent = agent
        self.dispatcher = dispatcher
        self.sink = sink
        self._ids = 0

    def send(self, method: str, params: Any) -> int:
        self._ids += 1
        message = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        self.dispatcher.receive(json.dumps(message).encode())
        return self._ids

    async def request(self, method: str, params: Any, timeout: float = 10) -> dict[str, Any]:
        """The whole reply (result or error) to one request."""
        msg_id = self.send(method, params)
        await self.dispatcher.settle(timeout)
        (reply,) = self.sink.replies(msg_id)
        return reply

    async def close(self) -> None:
        await self.dispatcher.close(timeout=2)
        await self.agent.close("test over")


async def in_process_agent(state_dir: Path, model: Any = None) -> InProcessAgent:
    """An initialized agent on ``state_dir`` (call on the loop that will drive it)."""
    agent = create_agent(state_dir, model)
    sink = LineSink()
    client = InProcessAgent(agent, AcpDispatcher(agent, sink), sink)
    reply = await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert "result" in reply, reply
    return client
