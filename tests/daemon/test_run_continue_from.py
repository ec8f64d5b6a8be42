"""``continueFrom`` after a daemon restart: the conversation rebuilt from transcripts is
the one the first daemon held in memory, message for message (the lent model sees both)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cleveragents.client import Client, RpcError

FIRST_TURNS: list[dict[str, Any]] = [
    {"content": "Reading two files.", "toolCalls": [
        {"id": "read-1", "name": "builtin/file-read", "arguments": {"path": "notes.txt"}},
        {"id": "read-2", "name": "builtin/file-read", "arguments": {"path": "missing.txt"}}]},
    {"content": "Listing.", "toolCalls": [{"name": "builtin/file-list", "arguments": {}}]},
    {"content": "notes.txt says hello."},
]  # fmt: skip


class LentModel:
    """Answers llm/generate from a script per run, and keeps what each call was shown."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[dict[str, Any]]] = {}
        self.seen: dict[str, list[list[dict[str, Any]]]] = {}
        """The messages after the system message (the instructions, which state the date
        and are rebuilt by each run, so are compared apart)."""
        self.systems: list[str] = []

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        run_id = params["runId"]
        system, *messages = params["messages"]
        assert system["role"] == "system"
        self.systems.append(system["content"])
        self.seen.setdefault(run_id, []).append(messages)
        turns = self.scripts.get(run_id, [{"content": f"answer to {run_id}"}])
        turn = turns[min(params["iteration"], len(turns)) - 1]
        calls = [{"id": c.get("id") or f"c{params['iteration']}-{i}", "name": c["name"],
                  "arguments": c["arguments"]} for i, c in enumerate(turn.get("toolCalls", []))]  # fmt: skip
        return {"content": turn["content"], "toolCalls": calls}


async def spawn(tmp_path: Path, model: LentModel) -> Client:
    client = await Client.spawn(tmp_path / "ws", state_dir=tmp_path / "state", llm=True)
    client.llm_handler = model
    return client


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("hello\n")
    return tmp_path


async def test_a_restarted_daemon_continues_a_run_with_the_conversation_it_had_in_memory(
    workspace: Path,
) -> None:
    first = LentModel()
    first.scripts["r1"] = FIRST_TURNS
    async with await spawn(workspace, first) as client:
        assert (await client.run("first", model="client", runId="r1"))["status"] == "completed"
        await client.run("second", model="client", runId="r2", continueFrom="r1")
        await client.run("third", model="client", runId="r3", continueFrom="r2")

    second = LentModel()
    async with await spawn(workspace, second) as client:
        await client.run("second", model="client", runId="r2-again", continueFrom="r1")
        await client.run("third", model="client", runId="r3-again", continueFrom="r2")

    # What the restarted daemon rebuilt from transcripts is what the first one held.
    assert second.seen["r2-again"] == first.seen["r2"]
    assert second.seen["r3-again"] == first.seen["r3"]
    assert all("Workspace root" in text for text in first.systems + second.systems)
    rebuilt = second.seen["r2-again"][0]
    assert [m["role"] for m in rebuilt] == [
        "user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "user"
    ]  # fmt: skip
    ok, failed = rebuilt[2], rebuilt[3]
    assert ok["toolCallId"] == "read-1"
    assert json.loads(ok["content"])["content"] == "hello\n"
    assert failed["toolCallId"] == "read-2"
    assert failed["isError"] is True
    assert rebuilt[1]["toolCalls"][1] == {
        "id": "read-2", "name": "builtin/file-read", "arguments": {"path": "missing.txt"}
    }  # fmt: skip
    assert rebuilt[-1] == {"role": "user", "content": "second"}


async def test_continuing_an_unknown_or_interrupted_run_is_a_clear_error(workspace: Path) -> None:
    runs = workspace / "state" / "runs"
    runs.mkdir(parents=True)
    (runs / "cut.jsonl").write_text(
        '{"method":"$/meta","params":{"runId":"cut","prompt":"p","startedAt":"2025-01-01T00:00:00+00:00"}}\n'
        '{"method":"run/started","params":{"runId":"cut","seq":1,"sandboxRoot":"/","maxIterations":3,"tools":[]}}\n'
    )
    async with await spawn(workspace, LentModel()) as client:
        with pytest.raises(RpcError) as unknown:
            await client.run("again", model="client", continueFrom="nope")
        with pytest.raises(RpcError) as interrupted:
            await client.run("again", model="client", continueFrom="cut")
    assert unknown.value.code == -32022
    assert interrupted.value.code == -32028
