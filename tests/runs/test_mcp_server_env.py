"""The environment a stdio MCP server of the run service sees: the user's real HOME, the
CA and proxy variables, the shell's allow-list and its entry's env; never a provider key
nor anything else of the process's own environment (issue 23, item 9)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cleveragents.mcp import McpConfigError, McpServerConfig
from cleveragents.protocol import ParamsError, structure, wire
from cleveragents.runs import RunService, RunSettings
from cleveragents.runs._mcp import NETWORK_ENV_NAMES
from cleveragents.tool import ToolRegistry
from kit.paths import SDK_SERVER

NETWORK = {
    "SSL_CERT_FILE": "/etc/corp/ca.pem",
    "ssl_cert_dir": "/etc/corp/certs",
    "REQUESTS_CA_BUNDLE": "/etc/corp/bundle.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/corp/node.pem",
    "HTTPS_PROXY": "http://proxy.corp:3128",
    "http_proxy": "http://proxy.corp:3128",
    "NO_PROXY": "localhost,.corp",
}
HIDDEN = {
    "OPENAI_API_KEY": "sk-never-to-a-server",
    "ANTHROPIC_API_KEY": "never-either",
    "DATABASE_URL": "postgres://u:pw@db/x",
    "USER": "someone",
}


async def test_a_stdio_server_sees_the_real_home_the_ca_and_proxy_variables_and_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    workspace = tmp_path / "project"
    workspace.mkdir()
    for name in NETWORK_ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    for name, value in {"HOME": str(home), **NETWORK, **HIDDEN}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TZ", "Europe/Paris")
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(workspace),))
    service = RunService(settings, [])
    pool = service.mcp_servers("run", ToolRegistry())
    entry = McpServerConfig(
        "e", command=sys.executable, args=[str(SDK_SERVER)], env={"FROM_ENTRY": "entry"}
    )
    try:
        pool.start([entry])
        await pool.wait_ready()
        server = pool.servers["e"]
        assert server.status == "ready", server.error
        names = ["HOME", "TZ", "FROM_ENTRY", *NETWORK, *HIDDEN, "https_proxy", "SSL_CERT_DIR"]
        seen = {name: await server.call_tool("env", {"name": name}) for name in names}
    finally:
        await pool.close()
        await service.aclose()
    assert seen == {
        "HOME": str(home),  # not the workspace: npx and uvx caches stay out of the project
        "TZ": "Europe/Paris",
        "FROM_ENTRY": "entry",
        **NETWORK,
        **dict.fromkeys(HIDDEN, "<unset>"),
        "https_proxy": "<unset>",  # passed only as set: no case is made up
        "SSL_CERT_DIR": "<unset>",
    }
    assert not (workspace / ".cache").exists()
    assert not (workspace / ".npm").exists()


def test_every_network_variable_is_passed_in_both_cases() -> None:
    bases = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
             "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")  # fmt: skip
    assert set(NETWORK_ENV_NAMES) == {*bases, *(b.lower() for b in bases)}


def test_the_shell_keeps_its_own_tighter_allow_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cleveragents.workspace.shell import default_env

    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy:3128")
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/corp/ca.pem")
    env = default_env(str(tmp_path))
    assert env["HOME"] == str(tmp_path)
    assert "HTTPS_PROXY" not in env
    assert "SSL_CERT_FILE" not in env


def test_args_given_as_one_string_is_an_error_naming_args() -> None:
    with pytest.raises(McpConfigError) as caught:
        McpServerConfig("git", command="uvx", args="mcp-server-git --repo .")
    assert caught.value.field == "args"
    assert "list of strings" in caught.value.problem


def test_args_given_as_one_string_on_the_wire_is_refused_not_split() -> None:
    entry = {"name": "git", "command": "uvx", "args": "mcp-server-git"}
    with pytest.raises(ParamsError, match=r"^params\.args: expected an array, got string"):
        structure(entry, wire.McpServerEntry)
