"""The daemon's instructions through the real daemon subprocess and an OpenAI-compatible
server on loopback: what the provider is sent as the system message (the default text,
the workspace's AGENTS.md, systemPrompt), a nested AGENTS.md in a file tool's result,
and the switches (run/start's instructions, initializationOptions.instructions)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kit.loopback import LoopbackServer, data, sse_reply
from kit.rawpeer import RawDaemon

KEY = "sk-test-instructions"


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return data({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip


def text(words: str) -> Any:
    return sse_reply(chunk({"role": "assistant", "content": words}, "stop"), "data: [DONE]\n\n")


def read_call(path: str) -> Any:
    call = {"index": 0, "id": "call_r", "type": "function",
            "function": {"name": "builtin__file-read", "arguments": json.dumps({"path": path})}}  # fmt: skip
    return sse_reply(chunk({"role": "assistant", "tool_calls": [call]}, "tool_calls"),
                     "data: [DONE]\n\n")  # fmt: skip


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "api").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Run the tests with `make check`.\n")
    (root / "api" / "AGENTS.md").write_text("Handlers return JSON, never HTML.\n")
    (root / "api" / "routes.py").write_text("ROUTES = []\n")
    return root


def model(server: LoopbackServer) -> dict[str, Any]:
    return {"provider": "openai", "model": "gpt-test", "baseUrl": f"{server.base_url}/v1",
            "apiKeyEnv": "CA_TEST_KEY"}  # fmt: skip


async def run(daemon: RawDaemon, msg_id: int, **params: Any) -> dict[str, Any]:
    reply = await daemon.call(msg_id, "run/start", {"prompt": "go", **params})
    result: dict[str, Any] = reply["result"]
    assert result["status"] == "completed", result
    return result


async def test_the_provider_is_sent_the_instructions_agents_md_and_the_system_prompt(
    server: LoopbackServer, ws: Path, tmp_path: Path
) -> None:
    server.queue(read_call("api/routes.py"), text("Done."))
    daemon = await RawDaemon.start(ws, tmp_path / "state", env={"CA_TEST_KEY": KEY})
    try:
        await run(daemon, 2, runId="r1", model=model(server), systemPrompt="Be brief.")
    finally:
        await daemon.kill()
    first, second = (request.body["messages"] for request in server.requests)
    system = first[0]
    assert system["role"] == "system"
    assert f"Workspace root: {ws}" in system["content"]
    assert "Run the tests with `make check`." in system["content"]
    assert system["content"].endswith("Be brief.")
    assert first[1] == {"role": "user", "content": "go"}
    [tool] = [m for m in second if m["role"] == "tool"]
    output = json.loads(tool["content"])
    assert "Handlers return JSON, never HTML." in output["instructions"]
    assert output["content"] == "ROUTES = []\n"
    meta = json.loads((tmp_path / "state" / "runs" / "r1.jsonl").read_text().splitlines()[0])
    [used] = meta["params"]["instructions"]["files"]
    assert used["path"] == f"{ws}/AGENTS.md"


async def test_instructions_off_per_run_for_the_daemon_or_by_serve_sends_the_system_prompt_alone(
    server: LoopbackServer, ws: Path, tmp_path: Path
) -> None:
    server.queue(text("a"), text("b"), text("c"), text("d"), text("e"), text("f"))
    env = {"CA_TEST_KEY": KEY}
    daemon = await RawDaemon.start(ws, tmp_path / "state", env=env)
    try:
        await run(daemon, 2, model=model(server), instructions=False, systemPrompt="Only this.")
        await run(daemon, 3, model=model(server), instructions=False)
    finally:
        await daemon.kill()
    off = await RawDaemon.start(ws, tmp_path / "state", env=env, options={"instructions": False})
    try:
        await run(off, 2, model=model(server))
        await run(off, 3, model=model(server), instructions=True)
    finally:
        await off.kill()
    flag = await RawDaemon.start(ws, tmp_path / "state", "--no-instructions", env=env)
    try:
        await run(flag, 2, model=model(server))
        await run(flag, 3, model=model(server), instructions=True)
    finally:
        await flag.kill()
    sent = [request.body["messages"] for request in server.requests]
    assert sent[0] == [{"role": "system", "content": "Only this."},
                       {"role": "user", "content": "go"}]  # fmt: skip
    assert sent[1] == [{"role": "user", "content": "go"}]
    assert sent[2] == [{"role": "user", "content": "go"}]
    assert sent[3][0]["role"] == "system"
    assert "make check" in sent[3][0]["content"]
    assert sent[4] == [{"role": "user", "content": "go"}]  # serve --no-instructions
    assert "make check" in sent[5][0]["content"]  # ... and a run asking for them


async def test_initialize_refuses_instructions_of_the_wrong_type(ws: Path, tmp_path: Path) -> None:
    daemon = await RawDaemon.spawn(tmp_path / "state")
    try:
        reply = await daemon.call(1, "initialize", {
            "processId": None, "rootUri": ws.as_uri(), "capabilities": {},
            "initializationOptions": {"instructions": "no"}})  # fmt: skip
    finally:
        await daemon.kill()
    assert reply["error"]["code"] == -32602
    assert "instructions" in reply["error"]["message"]
