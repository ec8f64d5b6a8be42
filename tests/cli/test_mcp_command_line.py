"""MCP servers from the command line and config files (issue 23, item 8): ``--mcp``,
``--mcp-config``, ``config.toml``'s ``[mcp_servers.NAME]`` tables, a workspace's
``.mcp.json`` that starts nothing without the user's approval (``--yes`` is no
approval; off a terminal a line says how to approve), and ``cleveragents mcp``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from cleveragents.transcripts import TranscriptStore
from kit.cli import clean_env, cli, runs, workspace
from kit.models import script_file
from kit.paths import SDK_SERVER

SERVER = [sys.executable, str(SDK_SERVER)]


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config" / "cleveragents" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def history(state: Path) -> list[dict[str, Any]]:
    """The tool calls of the only run in ``state``."""
    [summary] = runs(state)
    return list(TranscriptStore(state).result(summary["runId"])["toolCallHistory"])


def outputs(state: Path) -> dict[str, Any]:
    return {r["toolName"]: r["output"] if r["success"] else r["error"] for r in history(state)}


def env_calls(*servers: str) -> str:
    """``-m`` for a model that asks each server's ``env`` tool for ``WHO``, then ends."""
    calls = [{"name": f"mcp:{server}/env", "arguments": {"name": "WHO"}} for server in servers]
    return script_file(Path(os.environ["H23C_TMP"]), {"content": "", "toolCalls": calls},
                       {"content": "done"})  # fmt: skip


@pytest.fixture(autouse=True)
def _tmp_for_scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H23C_TMP", str(tmp_path))


def test_mcp_flags_config_tables_and_mcp_config_files_all_start_their_servers(
    tmp_path: Path,
) -> None:
    config_file(tmp_path, f"""
model = "openai:gpt-4o-mini"  # unused: -m wins

[mcp_servers.tbl]
command = {json.dumps(SERVER[0])}
args = [{json.dumps(SERVER[1])}]
env = {{ WHO = "config.toml" }}
tool_timeout_sec = 30
""")  # fmt: skip
    extra = tmp_path / "servers.json"
    extra.write_text(json.dumps({"mcpServers": {
        "file": {"command": SERVER[0], "args": [SERVER[1]], "env": {"WHO": "mcp-config"}}}}))  # fmt: skip
    state = tmp_path / "state"
    flag = f"flag=env WHO='from the flag' {shlex.join(SERVER)}"
    out = cli(tmp_path, "run", "--yes", "-m", env_calls("tbl", "file", "flag"),
              "--state-dir", str(state), "--mcp", flag, "--mcp-config", str(extra), "go",
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert outputs(state) == {
        "mcp:tbl/env": "config.toml",
        "mcp:file/env": "mcp-config",
        "mcp:flag/env": "from the flag",  # quoted words stay one argument
    }


def test_a_flag_wins_over_a_config_table_of_the_same_name(tmp_path: Path) -> None:
    config_file(tmp_path, f"""
[mcp_servers.s]
command = {json.dumps(SERVER[0])}
args = [{json.dumps(SERVER[1])}]
env = {{ WHO = "config.toml" }}
""")  # fmt: skip
    state = tmp_path / "state"
    out = cli(tmp_path, "run", "--yes", "-m", env_calls("s"), "--state-dir", str(state),
              "--mcp", f"s=env WHO=flag {shlex.join(SERVER)}", "go",
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert outputs(state) == {"mcp:s/env": "flag"}


def test_a_disabled_table_is_not_started(tmp_path: Path) -> None:
    config_file(tmp_path, f"""
[mcp_servers.off]
command = {json.dumps(SERVER[0])}
args = [{json.dumps(SERVER[1])}]
enabled = false
""")  # fmt: skip
    state = tmp_path / "state"
    out = cli(tmp_path, "run", "--yes", "-m", env_calls("off"), "--state-dir", str(state), "go",
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "unknown tool" in outputs(state)["mcp:off/env"]


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('command = "uvx"\nargs = "mcp-server-git"', "mcp_servers.git.args: must be a list of strings"),
        ('command = "uvx"\nargz = ["x"]', "mcp_servers.git: unknown key 'argz'"),
        ('command = "uvx"\nurl = "https://h/mcp"', "mcp_servers.git.command: give exactly one"),
        ('url = "https://h/mcp"\nbearer_token_env_var = "NOT_SET_H23C"',
         "mcp_servers.git.bearer_token_env_var: $NOT_SET_H23C is not set"),
        ('command = "uvx"\nstartup_timeout_sec = 0', "mcp_servers.git.startup_timeout_sec: must be more"),
        ('command = "uvx"\nenv = { TOKEN = 5 }', "mcp_servers.git.env.TOKEN: must be a string"),
    ],
)  # fmt: skip
def test_a_bad_table_is_a_usage_error_naming_the_file_and_the_key(
    tmp_path: Path, table: str, words: str
) -> None:
    path = config_file(tmp_path, f"[mcp_servers.git]\n{table}\n")
    out = cli(tmp_path, "run", "-m", env_calls("git"), "--state-dir", str(tmp_path / "s"), "go",
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 2
    assert f"{path}: {words}" in out.stderr
    assert "Traceback" not in out.stderr
    assert runs(tmp_path / "s") == []


def test_a_bad_mcp_flag_is_a_usage_error(tmp_path: Path) -> None:
    for flag, words in (("noequals", "expected NAME=COMMAND"), ("a b=x", "must be 1-64"),
                        ("s=", "no command"), ("s='unclosed", "No closing quotation")):  # fmt: skip
        out = cli(tmp_path, "run", "-m", env_calls("s"), "--mcp", flag, "--state-dir",
                  str(tmp_path / "state"), "go", cwd=workspace(tmp_path))  # fmt: skip
        assert out.returncode == 2, flag
        assert words in out.stderr, (flag, out.stderr)


# -- a workspace's .mcp.json -------------------------------------------------------------


def project(tmp_path: Path, who: str = "the repository") -> Path:
    ws = workspace(tmp_path)
    servers = {"repo": {"command": SERVER[0], "args": [SERVER[1]], "env": {"WHO": who}}}
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return ws


def test_a_workspace_server_never_starts_unapproved_off_a_terminal_even_with_yes(
    tmp_path: Path,
) -> None:
    ws, state = project(tmp_path), tmp_path / "state"
    out = cli(tmp_path, "run", "--yes", "-m", env_calls("repo"), "--state-dir", str(state),
              "go", cwd=ws)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "unknown tool" in outputs(state)["mcp:repo/env"]
    assert (f"not starting 'repo' from {ws / '.mcp.json'}: a repository's MCP server starts "
            "only once you approve it, and there is no terminal to ask; approve it with: "
            f"cleveragents mcp approve repo --workspace {ws}") in out.stderr  # fmt: skip


def test_an_approved_server_starts_until_its_entry_changes(tmp_path: Path) -> None:
    ws, state = project(tmp_path), tmp_path / "state"
    approve = cli(tmp_path, "mcp", "approve", "repo", "--state-dir", str(state), cwd=ws)
    assert approve.returncode == 0, approve.stderr
    listed = cli(tmp_path, "mcp", "list", "--json", "--state-dir", str(state), cwd=ws)
    assert [(s["name"], s["status"]) for s in json.loads(listed.stdout)] == [("repo", "approved")]
    out = cli(tmp_path, "run", "-m", env_calls("repo"), "--state-dir", str(state), "--yes",
              "go", cwd=ws)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert outputs(state) == {"mcp:repo/env": "the repository"}
    project(tmp_path, who="changed")  # the same name, another entry: asked again
    shutil.rmtree(state / "runs")
    again = cli(tmp_path, "run", "-m", env_calls("repo"), "--state-dir", str(state), "--yes",
                "go", cwd=ws)  # fmt: skip
    assert "not starting 'repo'" in again.stderr
    listed = cli(tmp_path, "mcp", "list", "--json", "--state-dir", str(state), cwd=ws)
    assert json.loads(listed.stdout)[0]["status"].startswith("changed since approved")


def test_a_planted_or_copied_approval_approves_nothing(tmp_path: Path) -> None:
    ws, state = project(tmp_path), tmp_path / "state"
    other = tmp_path / "other-state"
    assert (
        cli(tmp_path, "mcp", "approve", "--all", "--state-dir", str(other), cwd=ws).returncode == 0
    )
    [approval] = (other / "mcp-approvals").iterdir()
    planted = state / "mcp-approvals" / approval.name
    planted.parent.mkdir(parents=True)
    shutil.copy(approval, planted)  # signed, but with another state dir's secret
    out = cli(tmp_path, "run", "-m", env_calls("repo"), "--state-dir", str(state), "--yes",
              "go", cwd=ws)  # fmt: skip
    assert "not starting 'repo'" in out.stderr
    record = json.loads(planted.read_text())
    record.pop("mac")
    planted.write_text(json.dumps(record))  # unsigned
    listed = cli(tmp_path, "mcp", "list", "--json", "--state-dir", str(state), cwd=ws)
    assert json.loads(listed.stdout)[0]["status"].startswith("not approved")


def test_a_user_server_of_the_same_name_shadows_the_repository_s(tmp_path: Path) -> None:
    ws, state = project(tmp_path), tmp_path / "state"
    out = cli(tmp_path, "run", "-m", env_calls("repo"), "--state-dir", str(state), "--yes",
              "--mcp", f"repo=env WHO=mine {shlex.join(SERVER)}", "go", cwd=ws)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert outputs(state) == {"mcp:repo/env": "mine"}
    assert "not starting" not in out.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_on_a_terminal_the_user_is_asked_once_and_the_answer_is_remembered(
    tmp_path: Path,
) -> None:
    ws, state = project(tmp_path), tmp_path / "state"
    model = env_calls("repo")
    command = (f"exec {sys.executable} -m cleveragents run --yes -m {model} "
               f"--state-dir {state} go 2>{tmp_path / 'err'}")  # fmt: skip
    child = pexpect.spawn("/bin/sh", ["-c", command], cwd=str(ws), env=clean_env(tmp_path),
                          encoding="utf-8", dimensions=(40, 200), timeout=30)  # fmt: skip
    try:
        child.expect(r"\.mcp\.json asks to start an MCP server")
        child.expect(r"repo: \S+python\S* \S+sdk_server\.py  \(env: WHO\)")
        child.expect(r"\[y/N\] ")
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert outputs(state) == {"mcp:repo/env": "the repository"}
    shutil.rmtree(state / "runs")
    out = cli(tmp_path, "run", "--yes", "-m", model, "--state-dir", str(state), "go", cwd=ws)
    assert out.returncode == 0, out.stderr
    assert outputs(state) == {"mcp:repo/env": "the repository"}  # remembered: not asked


def test_a_hostile_mcp_json_is_said_and_ignored_and_a_fifo_is_never_waited_on(
    tmp_path: Path,
) -> None:
    """The repository's file never stops the user's run, nor hangs it."""
    ws, state = workspace(tmp_path), tmp_path / "state"
    model = env_calls("x")
    for text, words in (
        ("[1, 2]", 'expected {"mcpServers"'),
        ('{"mcpServers": {"x": {"type": "sse", "url": "http://h/"}}}', "'sse' is not supported"),
        ('{"mcpServers": {"x": {"command": "a", "args": "b c"}}}', "mcpServers.x.args: must be a list"),
        ("[" * 100_000, "not JSON"),
        (" " * (1024 * 1024 + 1), "larger than"),
        (None, "not a regular file"),
    ):  # fmt: skip
        path = ws / ".mcp.json"
        path.unlink(missing_ok=True)
        if text is None:
            os.mkfifo(path)
        else:
            path.write_text(text)
        out = cli(tmp_path, "run", "-m", model, "--state-dir", str(state), "go", cwd=ws)
        assert out.returncode == 0, (words, out.stderr)
        assert f"cleveragents: ignoring {path}: " in out.stderr
        assert words in out.stderr, (words, out.stderr)
        assert "Traceback" not in out.stderr


# -- cleveragents mcp add / remove / list ------------------------------------------------


def test_add_and_remove_edit_config_toml_keeping_the_rest(tmp_path: Path) -> None:
    path = config_file(tmp_path, '# my settings\nmodel = "openai:gpt-4o-mini"\n')
    added = cli(tmp_path, "mcp", "add", "git", "--env", "A=1", "--", "uvx", "mcp-server-git",
                "--repo", "a b")  # fmt: skip
    assert added.returncode == 0, added.stderr
    web = cli(tmp_path, "mcp", "add", "web", "--url", "https://example.test/mcp", "--header",
              "X-Team=blue")  # fmt: skip
    assert web.returncode == 0, web.stderr
    import tomllib

    data = tomllib.loads(path.read_text())
    assert data["mcp_servers"] == {
        "git": {"command": "uvx", "args": ["mcp-server-git", "--repo", "a b"], "env": {"A": "1"}},
        "web": {"url": "https://example.test/mcp", "headers": {"X-Team": "blue"}},
    }
    twice = cli(tmp_path, "mcp", "add", "git", "--", "other")
    assert twice.returncode == 2
    assert "already has mcp_servers.git (--replace replaces it)" in twice.stderr
    listed = cli(tmp_path, "mcp", "list", cwd=workspace(tmp_path))
    assert (
        f"git  uvx mcp-server-git --repo 'a b'  (env: A)\n    from {path}; enabled" in listed.stdout
    )
    assert cli(tmp_path, "mcp", "remove", "git").returncode == 0
    text = path.read_text()
    assert text.startswith('# my settings\nmodel = "openai:gpt-4o-mini"\n')
    assert set(tomllib.loads(text)["mcp_servers"]) == {"web"}
    gone = cli(tmp_path, "mcp", "remove", "git")
    assert gone.returncode == 2
    assert "has no mcp_servers.git" in gone.stderr


def test_approve_without_names_needs_a_terminal_and_revoke_forgets(tmp_path: Path) -> None:
    ws, state = project(tmp_path), tmp_path / "state"
    asked = cli(tmp_path, "mcp", "approve", "--state-dir", str(state), cwd=ws)
    assert asked.returncode == 2
    assert "no terminal to ask: name the servers, or pass --all" in asked.stderr
    unknown = cli(tmp_path, "mcp", "approve", "nope", "--state-dir", str(state), cwd=ws)
    assert unknown.returncode == 2
    assert "has no server 'nope'" in unknown.stderr
    assert (
        cli(tmp_path, "mcp", "approve", "--all", "--state-dir", str(state), cwd=ws).returncode == 0
    )
    [approval] = (state / "mcp-approvals").iterdir()
    assert approval.stat().st_mode & 0o777 == 0o600
    assert "the repository" not in approval.read_text()  # a hash of the entry, not its values
    revoked = cli(tmp_path, "mcp", "revoke", "--state-dir", str(state), cwd=ws)
    assert revoked.stdout == "revoked repo\n"
    listed = cli(tmp_path, "mcp", "list", "--json", "--state-dir", str(state), cwd=ws)
    assert json.loads(listed.stdout)[0]["status"].startswith("not approved")


def test_config_reports_a_bad_table_as_run_would(tmp_path: Path) -> None:
    path = config_file(tmp_path, '[mcp_servers.git]\ncommand = "uvx"\nargs = "mcp-server-git"\n')
    out = cli(tmp_path, "config")
    assert out.returncode == 2
    assert f"cleveragents config: {path}: mcp_servers.git.args: must be a list" in out.stderr


def test_a_hostile_entry_cannot_write_escape_sequences_to_the_terminal(tmp_path: Path) -> None:
    ws, state = workspace(tmp_path), tmp_path / "state"
    hostile = {"command": "\x1b[2J\x1b]0;pwned\x07evil", "args": ["\x1b[31mred", "\r\n  ok"]}
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"x": hostile}}))
    listed = cli(tmp_path, "mcp", "list", "--state-dir", str(state), cwd=ws)
    run = cli(tmp_path, "run", "-m", env_calls("x"), "--state-dir", str(state), "go", cwd=ws)
    for text in (listed.stdout, listed.stderr, run.stderr):
        assert "\x1b" not in text
        assert "\x07" not in text
    assert "evil" in listed.stdout
