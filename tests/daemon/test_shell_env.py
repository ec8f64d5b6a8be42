"""``initializationOptions.shellEnv``: the names a user passes through to builtin/shell,
beside the fixed allow-list; nothing else of the daemon's environment reaches a command."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents.daemon import create_server
from cleveragents.rpc._dispatch import Dispatcher
from kit.inprocess import Sink, in_process_daemon
from kit.rawpeer import body


async def test_shell_env_passes_the_named_variables_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CA_TEST_PASSED", "passed-through")
    monkeypatch.setenv("CA_TEST_KEY", "pat-secret-value-123")
    dispatcher, sink = await in_process_daemon(tmp_path, {"shellEnv": ["CA_TEST_PASSED"]})
    script = [{"toolCalls": [{"name": "builtin/shell", "arguments": {"command": "env"}}]},
              {"content": "done"}]  # fmt: skip
    dispatcher.receive(body({"jsonrpc": "2.0", "id": "run", "method": "run/start", "params": {
        "prompt": "go", "automationProfile": "full-auto",
        "model": {"provider": "scripted", "script": script, "apiKeyEnv": "CA_TEST_KEY"}}}))  # fmt: skip
    await dispatcher.settle(timeout=30)
    (reply,) = sink.replies("run")
    (record,) = reply["result"]["toolCallHistory"]
    assert record["success"], record
    printed = record["output"]["stdout"]
    assert "CA_TEST_PASSED=passed-through" in printed
    assert "pat-secret-value-123" not in printed
    assert "CA_TEST_KEY" not in printed


@pytest.mark.parametrize("names", [["BAD NAME"], ["A=B"], [""]])
async def test_a_shell_env_name_that_is_not_a_variable_name_is_invalid_params(
    tmp_path: Path, names: list[str]
) -> None:
    sink = Sink()
    dispatcher = Dispatcher(create_server(tmp_path / "state"), sink)
    dispatcher.receive(body({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "capabilities": {}, "rootUri": tmp_path.as_uri(),
        "initializationOptions": {"shellEnv": names}}}))  # fmt: skip
    (reply,) = sink.replies(1)
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith("initializationOptions.shellEnv")
