"""A long real run against a provider that enforces its context window (issue 21's
acceptance): 300 iterations, each reading a 40 KB file through the built-in tool and the
real OpenAI adapter, complete without a single 400, every request under the window, the
records and the transcript whole; without compaction the same run fails on the
provider's refusal. Then ``continueFrom`` after a compaction, and the limits on the
wire's names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cleveragents.runs import CompactionSettings, RunRequest, RunService, RunSettings
from cleveragents.tool import Compacted, IterationFinished, RunEvent
from cleveragents.workspace import WorkspaceLimits, file_tools
from kit.fake_window import FILE, WindowedChat, write_big_file

pytest.importorskip("openai")

WINDOW = 48_000
TURNS = 300


def service_for(tmp_path: Path) -> RunService:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    settings = RunSettings(state_dir=tmp_path / "state", workspace_folders=(str(root),))
    return RunService(settings, file_tools(WorkspaceLimits()))


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-windowed")


class Collect:
    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def on_event(self, event: RunEvent, text: str | None) -> None:
        self.events.append(event)


async def run_long(tmp_path: Path, fake: WindowedChat, **request: Any) -> tuple[Any, Collect]:
    service = service_for(tmp_path)
    write_big_file(tmp_path / "ws")
    seen = Collect()
    try:
        handle = await service.start(
            RunRequest(prompt=f"Read {FILE} again and again.", model=fake.spec(),
                       run_id="long", max_iterations=TURNS + 1, automation_profile="trusted",
                       **request),
            seen,
        )  # fmt: skip
        result = await handle.result()
    finally:
        await service.aclose()
    return result, seen


@pytest.mark.timeout(240)  # 300 real HTTP model calls and file reads
@pytest.mark.usefixtures("key")
async def test_a_300_iteration_run_stays_inside_an_enforced_window(tmp_path: Path) -> None:
    with WindowedChat(WINDOW, TURNS) as fake:
        result, seen = await run_long(tmp_path, fake)
    assert fake.refused == []
    assert result.status == "completed", result.error
    assert result.content == "done"
    assert result.iterations == TURNS + 1
    assert max(fake.sizes) <= WINDOW
    assert len(result.tool_call_history) == TURNS
    assert all(r.success and len(json.dumps(r.output)) > 40_000 for r in result.tool_call_history)
    compactions = [e for e in seen.events if isinstance(e, Compacted)]
    assert {c.strategy for c in compactions} == {"prune", "summary"}
    iterations = [e for e in seen.events if isinstance(e, IterationFinished)]
    assert all(e.context_window == WINDOW for e in iterations)
    assert all(e.context_tokens is not None and e.context_tokens <= WINDOW for e in iterations)
    lines = (tmp_path / "state" / "runs" / "long.jsonl").read_text().splitlines()
    methods = [json.loads(line)["method"] for line in lines]
    assert methods.count("run/toolCall") == TURNS
    assert methods.count("run/compacted") == len(compactions)
    assert methods.count("$/compaction") == len(compactions)
    assert methods[-1] == "run/finished"


@pytest.mark.usefixtures("key")
async def test_without_compaction_the_same_run_fails_on_the_providers_400(
    tmp_path: Path,
) -> None:
    with WindowedChat(WINDOW, TURNS) as fake:
        result, _ = await run_long(tmp_path, fake, compaction=CompactionSettings(enabled=False))
    assert result.status == "failed"
    assert result.error is not None
    assert "longer than the model's context window (HTTP 400)" in result.error.message
    assert len(fake.refused) == 1
    assert "maximum context length is 48000 tokens" in fake.refused[0]
    assert 3 < result.iterations < 10  # it got a few iterations in, then hit the wall


@pytest.mark.usefixtures("key")
async def test_continuing_a_compacted_run_after_a_restart_sends_the_compacted_conversation(
    tmp_path: Path,
) -> None:
    with WindowedChat(WINDOW, 20) as fake:
        first, seen = await run_long(tmp_path, fake)
        assert first.status == "completed"
        assert any(isinstance(e, Compacted) for e in seen.events)
        last_size = fake.sizes[-1]
        service = service_for(tmp_path)  # a new process: only the transcript remembers
        try:
            handle = await service.start(
                RunRequest(prompt="And now?", model=fake.spec(), continue_from="long",
                           automation_profile="trusted", max_iterations=1)
            )  # fmt: skip
            await handle.result()
        finally:
            await service.aclose()
        sent = fake.server.requests[-1].body["messages"]
    assert fake.refused == []
    # The continued request is the compacted conversation plus the new prompt, not the
    # 20 whole outputs (which alone would be over 200,000 tokens).
    assert fake.sizes[-1] < last_size + 2_000
    stubs = [
        m for m in sent if m["role"] == "tool" and "was cut from the conversation" in m["content"]
    ]
    assert stubs
    assert sent[-1] == {"role": "user", "content": "And now?"}
    # Each stub names the file under the state dir that keeps the pruned output whole.
    outputs = tmp_path / "state" / "outputs" / "long"
    for stub in stubs:
        where = re.search(r"the whole output is kept in (\S+)\. ", stub["content"])
        assert where is not None, stub["content"]
        kept = Path(where.group(1))
        assert kept.parent == outputs
        assert json.loads(kept.read_text())["content"] == (tmp_path / "ws" / FILE).read_text()
        assert kept.stat().st_mode & 0o777 == 0o600
