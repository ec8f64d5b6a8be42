"""``cleveragents run``'s instructions, as a provider on loopback receives them: the
workspace's AGENTS.md in the system message before ``--system``, and
``--no-instructions`` leaving ``--system`` alone."""

from __future__ import annotations

from pathlib import Path

from cli_kit import openai_model, openai_text

from kit.cli import cli, meta, runs, workspace
from kit.loopback import LoopbackServer


def test_agents_md_reaches_the_model_before_system_and_meta_names_it(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "AGENTS.md").write_text("Always answer in haiku.\n")
    state = tmp_path / "state"
    with LoopbackServer() as server:
        server.queue(openai_text("Five, seven, five."))
        out = cli(tmp_path, "run", "-m", openai_model(server), "--state-dir", str(state),
                  "--system", "Sign with your name.", "Describe this project",
                  cwd=ws, OPENAI_API_KEY="unused")  # fmt: skip
    assert out.returncode == 0, out.stderr
    [request] = server.requests
    system, user = request.body["messages"]
    assert system["role"] == "system"
    assert f"Workspace root: {ws}" in system["content"]
    assert "Always answer in haiku." in system["content"]
    assert system["content"].endswith("Sign with your name.")
    assert user == {"role": "user", "content": "Describe this project"}
    [run] = runs(state)
    [used] = meta(state, run["runId"])["instructions"]["files"]
    assert used["path"] == f"{ws}/AGENTS.md"


def test_no_instructions_sends_the_system_prompt_alone(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "AGENTS.md").write_text("Always answer in haiku.\n")
    with LoopbackServer() as server:
        server.queue(openai_text("4"), openai_text("4"))
        for extra in (["--system", "One word."], []):
            out = cli(tmp_path, "run", "-m", openai_model(server), "--no-instructions",
                      *extra, "--state-dir", str(tmp_path / "state"), "2+2?",
                      cwd=ws, OPENAI_API_KEY="unused")  # fmt: skip
            assert out.returncode == 0, out.stderr
    with_system, bare = (request.body["messages"] for request in server.requests)
    assert with_system == [{"role": "system", "content": "One word."},
                           {"role": "user", "content": "2+2?"}]  # fmt: skip
    assert bare == [{"role": "user", "content": "2+2?"}]
