"""Every request gets an answer, and the daemon survives bad input (``docs/daemon.md``;
error codes in ``client-protocol/PROTOCOL.md``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kit.rawpeer import RawDaemon, body


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[RawDaemon]:
    (tmp_path / "ws").mkdir()
    started = await RawDaemon.start(tmp_path / "ws", tmp_path / "state")
    yield started
    await started.kill()


async def assert_alive(daemon: RawDaemon) -> None:
    reply = await daemon.call("alive", "tools/list", {})
    assert "builtin/file-read" in [t["name"] for t in reply["result"]["tools"]]


async def test_malformed_json_gets_a_parse_error_with_a_null_id(daemon: RawDaemon) -> None:
    daemon.send_body(b'{"jsonrpc": "2.0", "id": 7, "method": ')
    reply = await daemon.next()
    assert reply["id"] is None
    assert reply["error"]["code"] == -32700
    await assert_alive(daemon)


@pytest.mark.parametrize(
    "message", [b"[]", b"42", b'"text"', b'{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}']
)
async def test_messages_that_are_not_requests_get_invalid_request(
    daemon: RawDaemon, message: bytes
) -> None:
    daemon.send_body(message)
    reply = await daemon.next()
    assert reply["error"]["code"] == -32600
    await assert_alive(daemon)


async def test_a_request_without_params_gets_invalid_params(daemon: RawDaemon) -> None:
    daemon.send_body(body({"jsonrpc": "2.0", "id": 5, "method": "run/start"}))
    reply = await daemon.reply_to(5)
    assert reply["error"]["code"] == -32602
    assert "params" in reply["error"]["message"]
    await assert_alive(daemon)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"prompt": 3}, "params.prompt"),
        ({}, "params.prompt"),
        ({"prompt": "x", "maxIterations": "3"}, "params.maxIterations"),
        ({"prompt": "x", "tools": [1]}, "params.tools[0]"),
        ({"prompt": "x", "resourceBindings": []}, "params.resourceBindings"),
        ([1, 2], "params"),
        ({"prompt": "x", "checkpoints": "no"}, "params.checkpoints"),
        ({"prompt": "x", "forkFrom": {"runId": 5, "iteration": 1}}, "params.forkFrom.runId"),
        ({"prompt": "x", "forkFrom": {"runId": "r"}}, "params.forkFrom.iteration"),
    ],
)
async def test_params_of_the_wrong_shape_name_the_field(
    daemon: RawDaemon, params: object, field: str
) -> None:
    reply = await daemon.call(9, "run/start", params)
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith(field + ":")
    assert "Traceback" not in reply["error"]["message"]


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("run/diff", {"runId": 3}, "params.runId"),
        ("run/diff", {"runId": "r", "iteration": "1"}, "params.iteration"),
        ("run/revert", {}, "params.runId"),
        ("run/revert", {"runId": "r", "force": "yes"}, "params.force"),
        ("checkpoint/restore", {"checkpointId": ["x"]}, "params.checkpointId"),
        ("checkpoint/restore", {"checkpointId": "a", "dryRun": 1}, "params.dryRun"),
    ],
)  # fmt: skip
async def test_checkpoint_requests_of_the_wrong_shape_name_the_field(
    daemon: RawDaemon, method: str, params: object, field: str
) -> None:
    reply = await daemon.call(9, method, params)
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith(field + ":")
    await assert_alive(daemon)


async def test_an_unknown_method_gets_method_not_found(daemon: RawDaemon) -> None:
    reply = await daemon.call(11, "no/such", {})
    assert reply["error"]["code"] == -32601
    await assert_alive(daemon)


async def test_an_unknown_notification_is_ignored(daemon: RawDaemon) -> None:
    daemon.send({"jsonrpc": "2.0", "method": "no/such", "params": {}})
    await assert_alive(daemon)


@pytest.mark.parametrize(
    ("params", "code", "words"),
    [
        ({"prompt": "  "}, -32602, "prompt"),
        ({"prompt": "x", "maxIterations": 0}, -32602, "maxIterations"),
        ({"prompt": "x", "model": "scripted:/x", "sandboxRoot": "/etc"}, -32019, "/etc"),
        (
            {"prompt": "x", "model": "scripted:/x", "automationProfile": "yolo"},
            -32024,
            "supervised",
        ),
        ({"prompt": "x"}, -32020, "CLEVERAGENTS_MODEL"),
        ({"prompt": "x", "model": "gpt:4"}, -32020, "openai:MODEL"),
        ({"prompt": "x", "model": "client"}, -32025, "llm"),
        ({"prompt": "x", "model": "scripted:/no/such/file.json"}, -32020, "/no/such/file.json"),
    ],
)
async def test_requests_that_cannot_start_a_run_are_errors(
    daemon: RawDaemon, params: dict[str, object], code: int, words: str
) -> None:
    reply = await daemon.call(13, "run/start", params)
    assert reply["error"]["code"] == code, reply
    assert words in reply["error"]["message"]
    runs = await daemon.call(14, "run/list", {})
    assert runs["result"]["runs"] == []  # nothing was started, nothing persisted


async def test_requests_after_shutdown_are_answered(daemon: RawDaemon) -> None:
    assert (await daemon.call(20, "shutdown", None))["result"] is None
    reply = await daemon.call(21, "tools/list", {})
    assert reply["error"]["code"] == -32600
    daemon.send({"jsonrpc": "2.0", "method": "exit"})
    assert await daemon.wait_exit(2) == 0


async def test_exit_without_shutdown_exits_with_1(daemon: RawDaemon) -> None:
    daemon.send({"jsonrpc": "2.0", "method": "exit"})
    assert await daemon.wait_exit(2) == 1


async def test_requests_before_initialize_are_refused(tmp_path: Path) -> None:
    raw = await RawDaemon.spawn(tmp_path)
    try:
        reply = await raw.call(1, "tools/list", {})
        assert reply["error"]["code"] == -32026
    finally:
        await raw.kill()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"initializationOptions": {"stateDir": 3}}, "initializationOptions.stateDir"),
        ({"initializationOptions": {"model": 5}}, "initializationOptions.model"),
        ({"initializationOptions": {"checkpoints": "no"}}, "initializationOptions.checkpoints"),
        ({"capabilities": {"experimental": {"cleveragents": {"llm": "yes"}}}},
         "capabilities.experimental.cleveragents.llm"),
        ({"initializationOptions": {"profiles": {"mine": {"read": "maybe", "write": "ask",
                                                          "execute": "deny"}}}},
         "initializationOptions.profiles['mine'].read"),
        ({"initializationOptions": {"profiles": {"mine": {"read": "allow", "write": "ask",
                                                          "execute": "deny", "never_ask": True}}}},
         "initializationOptions.profiles['mine']"),
    ],
)  # fmt: skip
async def test_initialize_with_options_of_the_wrong_type_names_the_field(
    tmp_path: Path, params: dict[str, object], field: str
) -> None:
    raw = await RawDaemon.spawn(tmp_path)
    try:
        reply = await raw.call(1, "initialize", {"processId": None, "rootUri": tmp_path.as_uri(),
                                                  "capabilities": {}, **params})  # fmt: skip
        assert reply["error"]["code"] == -32602
        assert reply["error"]["message"].startswith(field + ":")
    finally:
        await raw.kill()


@pytest.mark.parametrize("depth", [25, 150, 300])
async def test_a_schema_nested_too_deeply_to_compile_is_invalid_params(
    daemon: RawDaemon, depth: int
) -> None:
    """A validator is Python code with a block per level, and Python caps how deeply
    blocks nest: such a schema is refused by name, and the daemon goes on."""
    schema: dict[str, object] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    tool = {"name": "deep/tool", "description": "Deep.", "inputSchema": schema}
    reply = await daemon.call(31, "tools/register", {"tools": [tool]})
    assert reply["error"]["code"] == -32602
    assert "nested too deeply" in reply["error"]["message"]
    assert "deep/tool" in reply["error"]["message"]
    listed = await daemon.call(32, "tools/list", {})
    assert "deep/tool" not in {t["name"] for t in listed["result"]["tools"]}
