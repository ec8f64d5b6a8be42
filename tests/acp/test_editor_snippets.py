"""Each editor snippet of ``docs/acp.md`` works as written (issue 24, item 8): its command
line, read from the doc (never copied here), is started as the editor would start it,
``cleveragents`` found on ``PATH``, and completes a turn through the official ACP
TypeScript SDK with the model and an MCP server from ``config.toml`` alone (``serve``
reads it). Without a model anywhere, the prompt's error tells an ACP user what they can
do (``config.toml``, the environment, ``--model``), not ``run/start``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kit.paths import SDK_SERVER

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "acp.md"
TS = Path(__file__).resolve().parent / "ts"
BIN = Path(sys.executable).parent


def blocks(text: str) -> list[tuple[str, str, str]]:
    """``(the bold label before it, language, body)`` of each fenced block."""
    found = []
    for match in re.finditer(r"(?:\*\*([^*]+)\*\*[^\n]*\n)?```(\w*)\n(.*?)```", text, re.S):
        found.append((match.group(1) or "", match.group(2), match.group(3)))
    return found


def command_of(label: str, language: str, body: str) -> list[str]:
    """The argv an editor runs for one snippet, read as that editor reads its config."""
    if language == "json":
        server = json.loads(body)["agent_servers"]["cleveragents"]
        return [server["command"], *server.get("args", [])]
    if language == "lua":
        match = re.search(r"commands\s*=\s*\{\s*default\s*=\s*\{([^}]*)\}", body)
        assert match, label
        return re.findall(r'"([^"]*)"', match.group(1))
    if language == "elisp":
        command = re.search(r':command\s+"([^"]+)"', body)
        params = re.search(r":command-params\s+'\(([^)]*)\)", body)
        assert command, label
        assert params, label
        return [command.group(1), *re.findall(r'"([^"]*)"', params.group(1))]
    raise AssertionError(f"{label}: a snippet in {language!r} this test cannot read")


def snippets() -> list[tuple[str, list[str]]]:
    text = DOC.read_text(encoding="utf-8")
    setup = text.split("## Editor setup", 1)[1].split("\n## ", 1)[0]
    found = [(label.strip(), command_of(label, language, body))
             for label, language, body in blocks(setup) if label]  # fmt: skip
    return found


def test_the_doc_has_the_four_editor_snippets_and_each_starts_the_acp_agent() -> None:
    found = dict(snippets())
    assert [label.split(",")[0].split(" (")[0] for label in found] == [
        "Zed", "JetBrains IDEs", "Neovim", "Emacs"
    ]  # fmt: skip
    for label, argv in found.items():
        assert argv[:4] == ["cleveragents", "serve", "--protocol", "acp"], label


def _case(tmp_path: Path, label: str, argv: list[str], *, with_config: bool) -> dict[str, Any]:
    slug = re.sub(r"\W+", "-", label.lower()).strip("-")
    home = tmp_path / slug
    workspace = home / "project"
    workspace.mkdir(parents=True)
    config = home / "config" / "cleveragents" / "config.toml"
    config.parent.mkdir(parents=True)
    turns = [
        {"content": "Asking the server.",
         "toolCalls": [{"name": "mcp:conf/env", "arguments": {"name": "WHO"}}]},
        {"content": "The model and the server came from config.toml."},
    ]  # fmt: skip
    (home / "turns.json").write_text(json.dumps(turns))
    if with_config:
        config.write_text(
            f'model = "scripted:{home / "turns.json"}"\n'
            f'state_dir = "{home / "state"}"\n\n'
            "[mcp_servers.conf]\n"
            f"command = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(SDK_SERVER))}]\n"
            'env = { WHO = "from config.toml" }\nstartup_timeout_sec = 60\n'
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEVERAGENTS_")}
    env.update(XDG_CONFIG_HOME=str(home / "config"), XDG_STATE_HOME=str(home / "xdg-state"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")  # fmt: skip
    return {"name": label, "command": argv[0], "args": argv[1:], "cwd": str(workspace),
            "env": env, "configFile": str(config),
            "expect": "a turn" if with_config else "no model"}  # fmt: skip


@pytest.mark.xdist_group("npm")
@pytest.mark.timeout(300)
def test_each_editor_snippet_completes_a_turn_with_the_model_from_config_toml(
    tmp_path: Path,
) -> None:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm and node are needed for the TypeScript SDK")
    if not (BIN / "cleveragents").exists():
        pytest.skip("the cleveragents console script is not installed beside this Python")
    if not (TS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=TS, check=True, timeout=240)
    found = snippets()
    cases = [_case(tmp_path, label, argv, with_config=True) for label, argv in found]
    label, argv = found[2]  # Neovim's, which passes no flag: the error it gets alone
    cases.append(_case(tmp_path, f"{label} without config.toml", argv, with_config=False))
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    done = subprocess.run(
        [node, "--test", "--test-concurrency=1", "snippets.mjs"], cwd=TS,
        env={**os.environ, "SNIPPET_CASES": str(path)}, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert done.stdout.count("\nok ") + done.stdout.startswith("ok ") == len(cases), done.stdout
