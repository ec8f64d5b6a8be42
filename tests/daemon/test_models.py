"""Real model providers through the daemon: an OpenAI-compatible server on loopback, and
the editor's own model through ``llm/generate`` (``docs/models.md``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kit.loopback import LoopbackServer, data, sse_reply
from kit.rawpeer import RawDaemon

SECRET = "sk-test-0123456789-do-not-leak"


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return data({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip


def usage(prompt: int, completion: int) -> str:
    return data({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                          "total_tokens": prompt + completion}})  # fmt: skip


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def openai_model(server: LoopbackServer, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "model": "gpt-test", "baseUrl": f"{server.base_url}/v1",
            "apiKeyEnv": "CA_TEST_KEY", **extra}  # fmt: skip


async def start(tmp_path: Path, *extra: str, **kw: Any) -> RawDaemon:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "a.txt").write_text("alpha\n")
    return await RawDaemon.start(tmp_path / "ws", tmp_path / "state", *extra,
                                 env={"CA_TEST_KEY": SECRET}, **kw)  # fmt: skip


async def test_a_run_through_an_openai_compatible_server_streams_and_reports_usage(
    server: LoopbackServer, tmp_path: Path
) -> None:
    tool_start = {"index": 0, "id": "call_a", "type": "function",
                  "function": {"name": "builtin__file-read", "arguments": '{"pa'}}  # fmt: skip
    server.queue(
        sse_reply(
            chunk({"role": "assistant", "content": "Let me "}),
            chunk({"content": "read it."}),
            chunk({"tool_calls": [tool_start]}),
            chunk(
                {"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a.txt"}'}}]},
                finish="tool_calls",
            ),
            usage(11, 7),
            "data: [DONE]\n\n",
        ),
        sse_reply(
            chunk({"content": "It says "}),
            chunk({"content": "alpha."}, finish="stop"),
            usage(20, 3),
            "data: [DONE]\n\n",
        ),
    )
    daemon = await start(tmp_path)
    try:
        reply = await daemon.call(2, "run/start", {"prompt": "read a.txt", "runId": "oa",
                                                   "model": openai_model(server)})  # fmt: skip
    finally:
        await daemon.kill()
    result = reply["result"]
    assert result["status"] == "completed", result
    assert result["content"] == "It says alpha."
    assert result["usage"] == {"inputTokens": 31, "outputTokens": 10}
    (record,) = result["toolCallHistory"]
    assert (record["toolName"], record["inputs"], record["success"]) == (
        "builtin/file-read", {"path": "a.txt"}, True)  # fmt: skip
    notes = [m for m in daemon.messages if m.get("method", "").startswith("run/")]
    for iteration in (1, 2):
        deltas = "".join(m["params"]["text"] for m in notes if m["method"] == "run/messageDelta"
                         and m["params"]["iteration"] == iteration)  # fmt: skip
        (summary,) = [m["params"] for m in notes if m["method"] == "run/iteration"
                      and m["params"]["iteration"] == iteration]  # fmt: skip
        assert deltas == summary["content"]
        assert summary["usage"] in ({"inputTokens": 11, "outputTokens": 7},
                                    {"inputTokens": 20, "outputTokens": 3})  # fmt: skip
    # The key went to the server, and nowhere else.
    assert SECRET in json.dumps(server.requests[0].headers)
    transcript = (tmp_path / "state" / "runs" / "oa.jsonl").read_text()
    assert SECRET not in transcript
    assert SECRET not in json.dumps(daemon.messages)
    assert SECRET not in await daemon.stderr()


async def test_a_provider_error_fails_the_run_without_leaking_the_key(
    server: LoopbackServer, tmp_path: Path
) -> None:
    from kit.loopback import json_reply

    server.queue(json_reply({"error": {"message": f"Incorrect API key provided: {SECRET}",
                                       "type": "invalid_request_error"}}, status=401))  # fmt: skip
    daemon = await start(tmp_path, "--log-level", "DEBUG")
    try:
        reply = await daemon.call(2, "run/start", {"prompt": "x", "runId": "bad-key",
                                                   "model": openai_model(server)})  # fmt: skip
    finally:
        await daemon.kill()
    result = reply["result"]
    assert result["status"] == "failed"
    assert result["error"]["code"] == -32021
    assert SECRET not in json.dumps(result)
    assert SECRET not in (tmp_path / "state" / "runs" / "bad-key.jsonl").read_text()
    assert SECRET not in await daemon.stderr()


async def test_a_hanging_server_fails_the_run_after_the_timeout(
    server: LoopbackServer, tmp_path: Path
) -> None:
    server.queue(sse_reply(chunk({"role": "assistant", "content": ""}), hang=True))
    daemon = await start(tmp_path)
    try:
        reply = await daemon.call(2, "run/start", {
            "prompt": "x", "model": openai_model(server, timeoutMs=300, maxRetries=0)})  # fmt: skip
    finally:
        await daemon.kill()
    assert reply["result"]["status"] == "failed"
    assert reply["result"]["error"]["code"] == -32021


async def test_cancelling_mid_stream_ends_the_run_promptly(
    server: LoopbackServer, tmp_path: Path
) -> None:
    server.queue(sse_reply(chunk({"role": "assistant", "content": "Thinking"}), hang=True))
    daemon = await start(tmp_path)
    try:
        daemon.send({"jsonrpc": "2.0", "id": 2, "method": "run/start", "params": {
            "prompt": "x", "runId": "mid", "model": openai_model(server)}})  # fmt: skip
        while (await daemon.next()).get("method") != "run/messageDelta":
            pass
        loop = asyncio.get_running_loop()
        started = loop.time()
        daemon.send({"jsonrpc": "2.0", "id": 3, "method": "run/cancel", "params": {"runId": "mid"}})
        reply = await daemon.reply_to(2, timeout=5)
        elapsed = loop.time() - started
    finally:
        await daemon.kill()
    assert reply["result"]["status"] == "cancelled"
    assert elapsed < 1.0  # generous: the target is 200 ms; measured in scripts/bench


async def test_the_client_model_is_asked_through_llm_generate(tmp_path: Path) -> None:
    daemon = await start(tmp_path, capabilities={"experimental": {"cleveragents": {"llm": True}}})
    asked: list[dict[str, Any]] = []
    try:
        daemon.send({"jsonrpc": "2.0", "id": 2, "method": "run/start",
                     "params": {"prompt": "read a.txt", "model": "client", "runId": "lent"}})  # fmt: skip
        while True:
            message = await daemon.next()
            if message.get("method") == "llm/generate":
                params = message["params"]
                asked.append(params)
                if params["iteration"] == 1:
                    daemon.send({"jsonrpc": "2.0", "method": "llm/delta",
                                 "params": {"runId": "lent", "iteration": 1, "text": "Reading"}})  # fmt: skip
                    result = {"content": "Reading", "toolCalls": [
                        {"id": "t1", "name": "builtin/file-read", "arguments": {"path": "a.txt"}}],
                        "usage": {"inputTokens": 5, "outputTokens": 2}}  # fmt: skip
                else:
                    result = {"content": "alpha", "toolCalls": []}
                daemon.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            elif message.get("id") == 2:
                break
    finally:
        await daemon.kill()
    final = message["result"]
    assert final["status"] == "completed"
    assert final["content"] == "alpha"
    assert final["toolCallHistory"][0]["output"]["content"].startswith("alpha")
    assert final["usage"] == {"inputTokens": 5, "outputTokens": 2}
    first, second = asked
    system, *asked_first = first["messages"]
    assert system["role"] == "system"
    assert "Workspace root" in system["content"]
    assert asked_first == [{"role": "user", "content": "read a.txt"}]
    assert "builtin/file-read" in [t["name"] for t in first["tools"]]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][3]["toolCallId"] == "t1"
    deltas = [m["params"]["text"] for m in daemon.messages if m.get("method") == "run/messageDelta"]
    assert deltas == ["Reading"]


async def test_a_malformed_llm_generate_reply_fails_the_run_clearly(tmp_path: Path) -> None:
    daemon = await start(tmp_path, capabilities={"experimental": {"cleveragents": {"llm": True}}})
    try:
        daemon.send({"jsonrpc": "2.0", "id": 2, "method": "run/start",
                     "params": {"prompt": "x", "model": "client"}})  # fmt: skip
        while True:
            message = await daemon.next()
            if message.get("method") == "llm/generate":
                daemon.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": 3}})
            elif message.get("id") == 2:
                break
    finally:
        await daemon.kill()
    result = message["result"]
    assert result["status"] == "failed"
    assert result["error"]["code"] == -32021
    assert "result.content" in result["error"]["message"]
