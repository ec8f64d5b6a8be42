"""What ``cleveragents serve`` must not import before its ``initialize`` reply.

Start-up is measured against a bare pygls server (``scripts/bench/daemon_startup.py``,
goal <= 1.15x), and nearly all of the daemon's extra time is imports. Each module named
here is loaded at its first use instead (a run, a model, an MCP server, a validator's
first call); a change that pulls one back into start-up fails this test rather than
quietly adding its milliseconds to every editor's wait. The list is read from the real
daemon's ``-X importtime`` output, up to the moment its reply has been read.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

from cleveragents.client._connection import read_frame
from cleveragents.protocol import frame

NOT_BEFORE_INITIALIZE = {
    # provider SDKs and their HTTP stack: imported when an adapter is built
    "openai": "the OpenAI SDK",
    "anthropic": "the Anthropic SDK",
    "google.genai": "the Gemini SDK",
    "httpx": "the providers' and MCP's HTTP client",
    "cleveragents.llm.builtin": "the provider registrations and adapters",
    "cleveragents.llm.scripted": "the scripted model (built for a run)",
    "cleveragents.llm._windows": "the known-models table (a run's context window)",
    # (the codecs are not here: the tool core's router registers them as it is imported,
    # pure functions, ~0.8 ms of -X importtime in all)
    # MCP: the SDK and the client's connection, sign-in and reaper
    "mcp": "the MCP SDK",
    "cleveragents.mcp._connection": "an MCP server's session",
    "cleveragents.mcp._oauth": "MCP sign-in",
    "cleveragents.mcp._enterprise": "MCP enterprise sign-in",
    "cleveragents.mcp._stdio": "a stdio MCP server",
    "cleveragents.mcp._reaper": "an MCP server's process group",
    "cleveragents.mcp._server": "an MCP server (started after the initialize reply)",
    "cleveragents.mcp._link": "an MCP server's connection events and parameters",
    "cleveragents.mcp._tools": "an MCP server's tools as ToolSpecs",
    # OpenSSL's hashes: a state dir's signatures, a tool name too long to send, --tcp
    "hashlib": "hashlib (OpenSSL)",
    "hmac": "hmac",
    "secrets": "secrets (and its random)",
    # checkpoints: a run opens its workspace's store
    "cleveragents.checkpoints._store": "the checkpoint store",
    "sqlite3": "the checkpoint store's database",
    "difflib": "checkpoint diffs",
    # schema validators: the built-in tools compile theirs at their first call
    "cleveragents.tool._draft7_validator": "the draft-7 meta-schema's validator",
    # wire types no initialize message holds: built when their method is first used
    "cleveragents.protocol._types._tools": "the tools/* and permission/request wire types",
    "cleveragents.protocol._types._llm": "the llm/* wire types",
    "cleveragents.protocol._types._mcp_client": "the mcp/elicit wire types",
    "cleveragents.protocol._types._mcp_methods": "the mcp/* wire types",
    "cleveragents.protocol._types._run_requests": "the run/* requests' wire types",
    "cleveragents.protocol._types._checkpoints": "the checkpoint wire types (run/diff, forks)",
    # the other faces and the terminal client
    "cleveragents.acp": "the ACP face",
    "cleveragents.client.commands": "cleveragents run",
    "cleveragents.client._chat": "cleveragents chat",
    "cleveragents.client._terminal": "the terminal views",
    "rich": "the terminal's live view",
    "keyring": "the OS keyring (read when a key is looked up)",
    "tomllib": "the TOML parser, with no config.toml to read",
}

_VISIBLE_IMPORTS = """
import importlib, importlib.util, runpy, sys

def import_module(name, package=None):
    absolute = importlib.util.resolve_name(name, package)
    __import__(absolute)
    return sys.modules[absolute]

importlib.import_module = import_module
runpy.run_module("cleveragents", run_name="__main__", alter_sys=True)
"""
"""``python -m cleveragents`` as it is, but each ``importlib.import_module`` through the
import statement's own path, which alone ``-X importtime`` reports: a package's lazy
``__getattr__`` or a registry's import by name is seen as any other import."""

_IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$")


async def _modules_imported_before_initialize_reply(
    tmp_path: Path,
) -> tuple[set[str], dict[str, Any]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    stderr_path = tmp_path / "importtime.txt"
    env = {
        **os.environ,
        "PYTHONPROFILEIMPORTTIME": "1",  # -X importtime
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # no config.toml of the developer's
    }
    with stderr_path.open("wb") as stderr:  # a file: a full pipe would block the daemon
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _VISIBLE_IMPORTS, "serve", "--state-dir", str(tmp_path / "state"),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            env=env, cwd=workspace,
        )  # fmt: skip
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
            "initializationOptions": {"model": {"provider": "scripted", "script": [{"content": "hi"}]}},
        }}))  # fmt: skip
        async with asyncio.timeout(60):
            reply = await read_frame(process.stdout)
    finally:  # killed at once: whatever it imports later is not start-up's
        if process.returncode is None:
            process.kill()
        await process.wait()
    assert reply is not None, stderr_path.read_text()[-2000:]
    lines = stderr_path.read_text(encoding="utf-8", errors="replace").splitlines()
    modules = {m.group(1) for line in lines if (m := _IMPORT_LINE.match(line))}
    return modules, reply


def _loaded(modules: set[str], name: str) -> list[str]:
    return sorted(m for m in modules if m == name or m.startswith(name + "."))


async def test_serve_answers_initialize_without_importing_what_only_later_work_needs(
    tmp_path: Path,
) -> None:
    modules, reply = await _modules_imported_before_initialize_reply(tmp_path)
    assert "capabilities" in reply["result"], reply
    # the reading works: what initialize does need is there
    for needed in ("lsprotocol.types", "cleveragents.daemon._server", "cleveragents.runs"):
        assert needed in modules, needed
    found = {name: _loaded(modules, name) for name in NOT_BEFORE_INITIALIZE}
    early = {f"{name} ({NOT_BEFORE_INITIALIZE[name]})": hit for name, hit in found.items() if hit}
    assert not early, f"imported before the initialize reply: {early}"
