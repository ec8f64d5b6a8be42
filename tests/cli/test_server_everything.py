"""The acceptance check of issue 23: the reference MCP server
(``@modelcontextprotocol/server-everything``, pinned by ``tests/mcp/everything``'s lock
file) registers its elicitation, sampling and roots tools only for a client that
declares those capabilities; through ``cleveragents run`` on a pseudo-terminal all
three work, the terminal asking: the form field by field, the sampling as an approval of
``mcp:everything/sampling`` showing the messages. Skipped without node and npm."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from kit.cli import clean_env, runs
from kit.models import script_file
from kit.paths import ROOT

EVERYTHING = ROOT / "tests" / "mcp" / "everything"
SERVER = EVERYTHING / "node_modules" / "@modelcontextprotocol" / "server-everything"


def installed() -> str:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("node and npm are needed for server-everything")
    if not (SERVER / "dist" / "index.js").is_file():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=EVERYTHING, check=True,
                       timeout=240)  # fmt: skip
    return node


def call(tool: str, **arguments: object) -> dict[str, object]:
    return {"toolCalls": [{"name": f"mcp:everything/{tool}", "arguments": arguments}]}


@pytest.mark.xdist_group("npm")
@pytest.mark.timeout(180)
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_elicitation_sampling_and_roots_of_server_everything_through_cleveragents_run(
    tmp_path: Path,
) -> None:
    node = installed()
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    model = script_file(
        tmp_path,
        {"content": "First a form.", **call("trigger-elicitation-request")},
        {"content": "Sampled words.", **call("trigger-sampling-request", prompt="Say hi")},
        {"content": "Now the roots.", **call("get-roots-list")},
        {"content": "All three done."},
    )
    command = [
        "-m", "cleveragents", "run", "-m", str(model), "--state-dir", str(state),
        "--mcp", f"everything={node} {SERVER / 'dist' / 'index.js'} stdio", "try everything",
    ]  # fmt: skip
    child = pexpect.spawn(
        sys.executable, command, cwd=str(workspace), env=clean_env(tmp_path),
        encoding="utf-8", dimensions=(50, 160), timeout=60,
    )  # fmt: skip
    child.logfile_read = screen = io.StringIO()
    try:
        child.expect("mcp:everything/trigger-elicitation-request wants to run")
        child.expect(r"allow\?")
        child.sendline("y")
        child.expect("MCP server everything asks:")
        child.expect(r"answer\? \[y\]es, \[n\]o, \[c\]ancel: ")
        child.sendline("y")
        child.expect(r"name \(Your full, legal name\): ")
        child.sendline("Ada Lovelace")
        child.expect(r"check \(Agree to the terms and conditions\) \[y/n\], optional: ")
        child.sendline("y")
        for _ in range(11):  # every other field has a default or is optional: Enter
            child.expect(r"(default .*|optional): ")
            child.sendline("")
        child.expect("mcp:everything/trigger-sampling-request wants to run")
        child.expect(r"allow\?")
        child.sendline("y")
        child.expect("mcp:everything/sampling wants to run")
        child.expect(r"allow\?")
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    asked = screen.getvalue()
    question = asked[asked.index("mcp:everything/sampling wants to run") :]
    shown = " ".join(question[: question.index("allow?")].split())  # lines may wrap
    assert "context: Say hi" in shown  # the messages are shown
    [summary] = runs(state)
    lines = (state / "runs" / f"{summary['runId']}.jsonl").read_text().splitlines()
    records = [json.loads(line)["params"]["record"] for line in lines if '"run/toolCall"' in line]
    elicited, sampled, roots = (json.dumps(r["output"]) for r in records)
    assert all(r["success"] for r in records), records
    assert "User provided the requested information" in elicited
    assert "Name: Ada Lovelace" in elicited
    assert "Agreed to terms: true" in elicited
    assert "Sampled words." in sampled
    assert workspace.resolve().as_uri() in roots
