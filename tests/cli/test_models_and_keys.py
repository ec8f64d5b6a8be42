"""``cleveragents models``, ``cleveragents keys set|list|remove`` and ``-m NAME`` through
the real command: keys kept in a (fake) OS keyring or a 0600 file, read from a hidden
prompt or stdin and never from the command line, the environment winning, a bare known
model resolved to its provider and run with a stored key, and the key in no output."""

from __future__ import annotations

import json
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from cli_kit import Screen, openai_text

from cleveragents.transcripts import TranscriptStore
from kit.cli import clean_env, cli, runs, workspace
from kit.fake_keyring import NULL_BACKEND, keyring_env
from kit.loopback import LoopbackServer, Recorded, Reply, data, json_reply, sse_reply

KEY = "sk-test-7f3a9c2e5b1d4f8a0c6e2b9d7f1a3c5e"
"""A key this test invents; it must appear in no output of any command."""


def keys_file(tmp_path: Path) -> Path:
    return tmp_path / "config" / "cleveragents" / "keys.json"


def null_keyring() -> dict[str, str]:
    return {"PYTHON_KEYRING_BACKEND": NULL_BACKEND}


def no_key_anywhere(*outputs: Any) -> None:
    for output in outputs:
        text = output if isinstance(output, str) else output.stdout + output.stderr
        assert KEY not in text
        assert KEY[8:24] not in text  # nor a fragment of it


# -- keys --------------------------------------------------------------------------------


def test_keys_set_reads_stdin_into_the_file_store_and_list_names_it(tmp_path: Path) -> None:
    stored = cli(tmp_path, "keys", "set", "openai", input=KEY + "\n", **null_keyring())
    assert stored.returncode == 0, stored.stderr
    path = keys_file(tmp_path)
    assert stored.stdout == f"stored the key for openai (OPENAI_API_KEY) in the file {path}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text())["keys"] == {"OPENAI_API_KEY": KEY}
    listed = cli(tmp_path, "keys", "list", **null_keyring())
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "OPENAI_API_KEY" in line)
    assert row.split() == ["openai,", "openai-responses", "OPENAI_API_KEY", "file", str(path)]
    as_json = cli(tmp_path, "keys", "list", "--json", **null_keyring())
    entry = next(e for e in json.loads(as_json.stdout) if "openai" in e["providers"])
    assert entry["available"] is True
    assert entry["source"] == "file"
    no_key_anywhere(stored, listed, as_json)


def test_keys_set_stores_in_the_os_keyring_when_one_is_usable(tmp_path: Path) -> None:
    keyring_file = tmp_path / "fake-keyring.json"
    env = keyring_env(keyring_file)
    stored = cli(tmp_path, "keys", "set", "anthropic", input=KEY, **env)
    assert stored.returncode == 0, stored.stderr
    assert "in the keyring (" in stored.stdout
    assert json.loads(keyring_file.read_text()) == {"cleveragents/ANTHROPIC_API_KEY": KEY}
    assert not keys_file(tmp_path).exists()
    listed = cli(tmp_path, "keys", "list", **env)
    row = next(line for line in listed.stdout.splitlines() if "ANTHROPIC_API_KEY" in line)
    assert "keyring (" in row
    assert "new keys go to the keyring (" in listed.stdout
    removed = cli(tmp_path, "keys", "remove", "anthropic", **env)
    assert removed.returncode == 0, removed.stderr
    assert json.loads(keyring_file.read_text()) == {}
    again = cli(tmp_path, "keys", "remove", "anthropic", **env)
    assert again.returncode == 1
    assert "no key is stored for anthropic (ANTHROPIC_API_KEY)" in again.stderr
    no_key_anywhere(stored, listed, removed, again)


def test_the_environment_wins_and_list_says_so(tmp_path: Path) -> None:
    cli(tmp_path, "keys", "set", "openai", input=KEY, **null_keyring())
    listed = cli(tmp_path, "keys", "list", OPENAI_API_KEY="sk-from-the-env", **null_keyring())
    row = next(line for line in listed.stdout.splitlines() if "OPENAI_API_KEY" in line)
    assert "$OPENAI_API_KEY (wins over the one in the file " in row
    models = cli(tmp_path, "models", OPENAI_API_KEY="sk-from-the-env", **null_keyring())
    assert any(line.split()[:4] == ["gpt-4o*", "openai", "128,000", "yes"]
               and "$OPENAI_API_KEY" in line for line in models.stdout.splitlines())  # fmt: skip
    no_key_anywhere(listed, models)
    assert "sk-from-the-env" not in listed.stdout + models.stdout


def test_a_key_on_the_command_line_is_refused_and_never_echoed(tmp_path: Path) -> None:
    for args in (["keys", "set", "openai", KEY], ["keys", "set", "openai", f"--key={KEY}"],
                 ["keys", "set", f"--{KEY}", "openai"]):  # fmt: skip
        out = cli(tmp_path, *args, input="", **null_keyring())
        assert out.returncode == 2, args
        assert "key" in out.stderr
        no_key_anywhere(out)
    assert not keys_file(tmp_path).exists()


@pytest.mark.parametrize(
    ("stdin", "says"),
    [("", "no key given"), ("\n\n", "no key given"), (f"{KEY}\n{KEY}\n", "got 2 lines"),
     ("sk-has a space", "holds spaces or control characters")],
)  # fmt: skip
def test_keys_set_refuses_what_is_not_one_key(tmp_path: Path, stdin: str, says: str) -> None:
    out = cli(tmp_path, "keys", "set", "openai", input=stdin, **null_keyring())
    assert out.returncode == 2
    assert says in out.stderr
    no_key_anywhere(out)
    assert not keys_file(tmp_path).exists()


def test_keys_of_an_unknown_provider_or_a_keyless_one_are_usage_errors(tmp_path: Path) -> None:
    unknown = cli(tmp_path, "keys", "set", "nosuch", input=KEY, **null_keyring())
    assert unknown.returncode == 2
    assert "unknown provider 'nosuch': name one of anthropic, gemini, openai" in unknown.stderr
    keyless = cli(tmp_path, "keys", "remove", "scripted", **null_keyring())
    assert keyless.returncode == 2
    assert "the scripted model takes no key" in keyless.stderr
    own = cli(tmp_path, "keys", "set", "MY_LLAMA_KEY", input=KEY, **null_keyring())
    assert own.returncode == 0, own.stderr  # a spec's own apiKeyEnv
    listed = cli(tmp_path, "keys", "list", **null_keyring())
    assert any(line.split()[:3] == ["-", "MY_LLAMA_KEY", "file"]
               for line in listed.stdout.splitlines())  # fmt: skip


def test_a_key_file_others_can_read_is_reported_not_used(tmp_path: Path) -> None:
    cli(tmp_path, "keys", "set", "openai", input=KEY, **null_keyring())
    keys_file(tmp_path).chmod(0o644)
    listed = cli(tmp_path, "keys", "list", **null_keyring())
    assert listed.returncode == 1
    assert "can be read by others (mode 0644): chmod 600" in listed.stderr
    ran = cli(tmp_path, "run", "-m", "gpt-4o-mini", "--state-dir", str(tmp_path / "state"), "go",
              cwd=workspace(tmp_path), **null_keyring())  # fmt: skip
    assert ran.returncode == 2
    assert "can be read by others" in ran.stderr
    no_key_anywhere(listed, ran)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_keys_set_on_a_terminal_asks_at_a_hidden_prompt(tmp_path: Path) -> None:
    screen = Screen(100, 20)
    command = shlex.join([sys.executable, "-m", "cleveragents", "keys", "set", "gemini"])
    child = pexpect.spawn(
        "/bin/sh", ["-c", f"exec {command}"], cwd=str(tmp_path),
        env=clean_env(tmp_path, **null_keyring()), encoding="utf-8", dimensions=(20, 100),
        timeout=20,
    )  # fmt: skip
    child.logfile_read = screen
    try:
        child.expect(r"GOOGLE_API_KEY for gemini \(input hidden\): ")
        child.sendline(KEY)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert json.loads(keys_file(tmp_path).read_text())["keys"] == {"GOOGLE_API_KEY": KEY}
    no_key_anywhere(screen.raw.getvalue())  # not echoed


# -- models and -m NAME -------------------------------------------------------------------


def test_models_lists_the_table_and_whose_key_is_available(tmp_path: Path) -> None:
    cli(tmp_path, "keys", "set", "anthropic", input=KEY, **null_keyring())
    out = cli(tmp_path, "models", **null_keyring())
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:] if line.strip()}
    assert rows["gpt-4o*"][:4] == ["gpt-4o*", "openai", "128,000", "no"]
    assert rows["claude-sonnet-4*"][:4] == ["claude-sonnet-4*", "anthropic", "200,000", "yes"]
    assert "file" in " ".join(rows["claude-sonnet-4*"])
    # The widest window (1,048,576 and more) still leaves the key its own column.
    assert rows["gemini-2.5*"][:4] == ["gemini-2.5*", "gemini", "1,048,576", "no"]
    assert rows["gemini-1.5-pro*"][:4] == ["gemini-1.5-pro*", "gemini", "2,097,152", "no"]
    as_json = cli(tmp_path, "models", "--json", **null_keyring())
    models = json.loads(as_json.stdout)["models"]
    gemini = next(m for m in models if m["prefix"] == "gemini-2.5")
    assert gemini == {"prefix": "gemini-2.5", "provider": "gemini", "window": 1_048_576,
                      "keyAvailable": False, "keySource": None}  # fmt: skip
    no_key_anywhere(out, as_json)


@pytest.mark.parametrize(
    ("name", "spec"),
    [("claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"), ("gemini-2.5-pro", "gemini:gemini-2.5-pro")],
)  # fmt: skip
def test_a_bare_known_model_resolves_to_its_provider(tmp_path: Path, name: str, spec: str) -> None:
    out = cli(tmp_path, "run", "-m", name, "--state-dir", str(tmp_path / "state"), "go",
              cwd=workspace(tmp_path), **null_keyring())  # fmt: skip
    assert out.returncode == 2
    assert f"no API key for {spec}: set " in out.stderr
    assert "(or store one: cleveragents keys set " in out.stderr


def test_an_unknown_bare_model_says_how_to_name_it(tmp_path: Path) -> None:
    out = cli(tmp_path, "run", "-m", "llama-9000", "--state-dir", str(tmp_path / "state"), "go",
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 2
    assert out.stderr == (
        "cleveragents run: --model: unknown model 'llama-9000': name its provider "
        "(anthropic:llama-9000, gemini:llama-9000, openai:llama-9000, ...), or use a model the "
        "known-models table names (cleveragents models lists them)\n"
    )
    from_env = cli(tmp_path, "config", CLEVERAGENTS_MODEL="llama-9000")
    assert from_env.returncode == 2
    assert "$CLEVERAGENTS_MODEL: unknown model 'llama-9000'" in from_env.stderr


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return data({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip


def shell_then_answer(recorded: Recorded) -> Reply:
    """First an ``env`` through the shell tool (what would a command see?), then text."""
    if any(m["role"] == "tool" for m in recorded.body["messages"]):
        return openai_text("The environment holds no key.")
    name = next(t["function"]["name"] for t in recorded.body["tools"]
                if "shell" in t["function"]["name"])  # fmt: skip
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": json.dumps({"command": "env"})}}  # fmt: skip
    return sse_reply(_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
                     _chunk({}, "tool_calls"), "data: [DONE]\n\n")  # fmt: skip


def test_a_bare_model_runs_with_its_stored_key_which_no_output_holds(tmp_path: Path) -> None:
    """``-m gpt-4o-mini`` is ``openai:gpt-4o-mini``; the key comes from the keyring (the
    fake backend) and reaches the server as its bearer token, and nothing else: not the
    output, not the transcript, not a tool's command's environment."""
    pytest.importorskip("openai")
    env = keyring_env(tmp_path / "fake-keyring.json")
    state = tmp_path / "state"
    assert cli(tmp_path, "keys", "set", "openai", input=KEY, **env).returncode == 0
    with LoopbackServer(respond=shell_then_answer) as server:
        out = cli(tmp_path, "run", "-m", "gpt-4o-mini", "--state-dir", str(state), "--yes",
                  "--profile", "auto", "what does a command see?", cwd=workspace(tmp_path),
                  OPENAI_BASE_URL=f"{server.base_url}/v1", **env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == "The environment holds no key.\n"
    assert [r.headers.get("authorization") for r in server.requests] == [f"Bearer {KEY}"] * 2
    assert server.requests[0].body["model"] == "gpt-4o-mini"
    [summary] = runs(state)
    transcript = TranscriptStore(state).path(summary["runId"]).read_text()
    assert '"model":"openai:gpt-4o-mini"' in transcript.replace(" ", "")
    shell_output = json.dumps(TranscriptStore(state).result(summary["runId"])["toolCallHistory"])
    assert "PATH=" in shell_output  # the command ran and printed its environment
    no_key_anywhere(out, transcript, shell_output)


def test_a_refused_stored_key_is_named_by_its_store_and_never_echoed(tmp_path: Path) -> None:
    """The server's 401 quotes the key, as OpenAI's does: the message names where the
    key came from, and the key is cut."""
    pytest.importorskip("openai")
    state = tmp_path / "state"
    cli(tmp_path, "keys", "set", "openai", input=KEY, **null_keyring())
    refusal = {"error": {"message": f"Incorrect API key provided: {KEY[:12]}***{KEY[-4:]}. "
                                    f"You gave {KEY}.", "type": "invalid_request_error",
                         "code": "invalid_api_key"}}  # fmt: skip
    with LoopbackServer() as server:
        server.queue(json_reply(refusal, 401))
        out = cli(tmp_path, "run", "-m", "gpt-4o-mini", "--state-dir", str(state), "go",
                  cwd=workspace(tmp_path), OPENAI_BASE_URL=f"{server.base_url}/v1",
                  **null_keyring())  # fmt: skip
    assert out.returncode == 1
    assert "check OPENAI_API_KEY (stored: cleveragents keys)" in out.stderr
    [summary] = runs(state)
    no_key_anywhere(out, TranscriptStore(state).path(summary["runId"]).read_text())


def test_serve_takes_a_bare_model_name_as_run_does(tmp_path: Path) -> None:
    out = cli(tmp_path, "serve", "--model", "llama-9000")
    assert out.returncode == 2
    assert (
        "cleveragents serve: --model: unknown model 'llama-9000': name its provider" in out.stderr
    )
