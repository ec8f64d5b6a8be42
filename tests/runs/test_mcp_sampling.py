"""A server's ``sampling/createMessage`` through the run service and a real SDK server:
answered by the model of the run whose call it serves once the run's profile allows
``mcp:SERVER/sampling`` (allowed under ``trusted``; asked under ``supervised``, the
question naming the server and showing the messages; refused without anyone to ask);
a request with tools, or one outside a run, refused with words saying why."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from cleveragents.mcp import McpServerConfig, SamplingRefused
from cleveragents.mcp._hooks import read_sampling
from cleveragents.runs import RunRequest, RunService, RunSettings
from cleveragents.tool import PermissionQuery
from kit.paths import MCP_SERVERS
from kit.wait import WAIT_S

ASKING = McpServerConfig(
    "ask", command=sys.executable, args=(str(MCP_SERVERS / "asking_server.py"),),
    startup_timeout_s=WAIT_S,
)  # fmt: skip


def script(**arguments: Any) -> dict[str, Any]:
    """The model says a sentence and calls ``sample``; asked to sample, the scripted
    model answers with that same turn's words; then it ends."""
    call = {"name": "mcp:ask/sample", "arguments": {"text": "What is 2+2?", **arguments}}
    return {"provider": "scripted", "script": [
        {"content": "Four, I think.", "toolCalls": [call]}, {"content": "done"}]}  # fmt: skip


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[RunService]:
    root = tmp_path / "ws"
    root.mkdir()
    settings = RunSettings(
        state_dir=tmp_path / "state", workspace_folders=(str(root),), mcp_servers=(ASKING,)
    )
    service = RunService(settings)
    try:
        yield service
    finally:
        await service.aclose()


async def sampled(service: RunService, **request: Any) -> Any:
    handle = await service.start(RunRequest(prompt="sample", **request))
    result = await handle.result()
    assert result.status == "completed", result.error
    (record,) = result.tool_call_history
    return record.output


async def test_a_trusted_run_answers_with_its_own_model(service: RunService) -> None:
    assert await sampled(service, model=script(), automation_profile="trusted") == "Four, I think."


async def test_a_supervised_run_asks_showing_the_server_and_the_messages(
    service: RunService,
) -> None:
    asked: list[PermissionQuery] = []

    async def ask(query: PermissionQuery, reason: str) -> str:
        asked.append(query)
        return "reject_once" if query.spec.name.endswith("/sampling") else "allow_once"

    output = await sampled(service, model=script(), automation_profile="supervised", ask=ask)
    assert output.startswith("error:")
    assert "sampling refused: not allowed" in output
    tool, sampling = asked
    assert tool.spec.name == "mcp:ask/sample"
    assert sampling.spec.name == "mcp:ask/sampling"
    assert sampling.inputs == {
        "messages": [{"role": "user", "text": "What is 2+2?"}],
        "maxTokens": 50,
        "systemPrompt": "Answer briefly.",
    }


async def test_allowed_when_asked_it_answers(service: RunService) -> None:
    async def ask(query: PermissionQuery, reason: str) -> str:
        return "allow_once"

    output = await sampled(service, model=script(), automation_profile="supervised", ask=ask)
    assert output == "Four, I think."


async def test_without_anyone_to_ask_it_is_refused(tmp_path: Path) -> None:
    # The server's tools are trusted as reads, so its call runs unasked; the sampling it
    # asks for is a write, which supervised asks about, and with no one to ask refuses.
    root = tmp_path / "ws"
    root.mkdir()
    trusted = attrs.evolve(ASKING, trust="read")
    settings = RunSettings(
        state_dir=tmp_path / "state", workspace_folders=(str(root),), mcp_servers=(trusted,)
    )
    service = RunService(settings)
    try:
        output = await sampled(service, model=script(), automation_profile="supervised")
    finally:
        await service.aclose()
    assert output.startswith("error:")
    assert "sampling refused: not allowed" in output


@pytest.mark.parametrize(("profile", "answered"), [("trusted", True), ("supervised", False)])
async def test_outside_a_run_the_default_model_answers_under_the_default_profile(
    tmp_path: Path, profile: str, answered: bool
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    model = {"provider": "scripted", "script": [{"content": "From the default model."}]}
    settings = RunSettings(
        state_dir=tmp_path / "state", workspace_folders=(str(root),), mcp_servers=(ASKING,),
        model=model, automation_profile=profile,
    )  # fmt: skip
    service = RunService(settings)
    try:
        await service.mcp.wait_ready()
        output = await service.mcp.servers["ask"].call_tool("sample", {"text": "hi"})
    finally:
        await service.aclose()
    if answered:
        assert output == "From the default model."
    else:
        assert output.startswith("error:")
        assert "sampling refused: not allowed" in output


async def test_tools_in_a_sampling_request_are_refused_saying_so(service: RunService) -> None:
    output = await sampled(service, model=script(tools=True), automation_profile="trusted")
    assert output.startswith("error:")
    assert "tools" in output.lower()
    with pytest.raises(SamplingRefused, match="tools in sampling requests are not supported"):
        read_sampling("s", {"messages": [{"role": "user", "content": {"type": "text", "text": "x"}}],
                            "maxTokens": 5, "tools": [{"name": "lookup"}]})  # fmt: skip
