"""The spawn lines of ``docs/daemon.md`` work as written (issue 24, item 8): each command
line, read from the doc, is started by the Python client as an editor extension would
start it (``cleveragents`` and ``python`` found on ``PATH``), with no model and no flag,
and completes a turn with the model, the state dir and an MCP server of ``config.toml``
(``serve`` reads it); a client may replace a config server with its own of that name
(``mcp/remove``, ``mcp/add``)."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from cleveragents.client import Client
from kit.paths import SDK_SERVER

DOC = Path(__file__).resolve().parents[2] / "docs" / "daemon.md"
BIN = Path(sys.executable).parent


def spawn_lines() -> list[list[str]]:
    section = DOC.read_text(encoding="utf-8").split("## Spawning", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines() if line]


def test_the_doc_spawns_the_daemon_by_the_console_script_and_the_interpreter() -> None:
    assert spawn_lines() == [["cleveragents", "serve"], ["python", "-m", "cleveragents", "serve"]]


def configured(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A workspace, and an environment whose config.toml holds a scripted model, a state
    dir and an MCP server (no ``CLEVERAGENTS_*`` variable anywhere)."""
    turns = [
        {"content": "Asking.", "toolCalls": [{"name": "mcp:conf/env", "arguments": {"name": "WHO"}}]},
        {"content": "Configured by config.toml."},
    ]  # fmt: skip
    (tmp_path / "turns.json").write_text(json.dumps(turns))
    config = tmp_path / "config" / "cleveragents" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'model = "scripted:{tmp_path / "turns.json"}"\n'
        'profile = "trusted"\n'
        f'state_dir = "{tmp_path / "state"}"\n\n'
        f"[mcp_servers.conf]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(SDK_SERVER))}]\nenv = {{ WHO = "config.toml" }}\nstartup_timeout_sec = 60\n'
    )
    workspace = tmp_path / "project"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEVERAGENTS_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "xdg"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")  # fmt: skip
    return workspace, env


@pytest.mark.parametrize("line", range(2))
async def test_each_spawn_line_completes_a_turn_with_config_toml_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: int
) -> None:
    workspace, env = configured(tmp_path)
    for name in [k for k in os.environ if k.startswith("CLEVERAGENTS_")]:
        monkeypatch.delenv(name)
    argv = spawn_lines()[line]
    async with await Client.spawn(workspace, command=argv, env=env) as client:
        result = await client.run("who configured you?")
    assert result["status"] == "completed", result
    assert result["content"] == "Configured by config.toml."
    [record] = result["toolCallHistory"]
    assert (record["toolName"], record["output"]) == ("mcp:conf/env", "config.toml")
    assert list((tmp_path / "state" / "runs").glob("*.jsonl"))  # config.toml's state dir


async def test_a_client_may_replace_a_config_server_by_removing_it_and_adding_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, env = configured(tmp_path)
    for name in [k for k in os.environ if k.startswith("CLEVERAGENTS_")]:
        monkeypatch.delenv(name)
    async with await Client.spawn(workspace, command=spawn_lines()[0], env=env) as client:
        await client.remove_mcp_servers(["conf"])
        added = await client.add_mcp_servers([{
            "name": "conf", "command": sys.executable, "args": [str(SDK_SERVER)],
            "env": {"WHO": "the client"},
        }])  # fmt: skip
        assert added == ["conf"]
        result = await client.run("who configured you?")
    assert result["toolCallHistory"][0]["output"] == "the client"
