"""The Python client's contract with its caller, against the real daemon: cancelling the
awaiting task cancels the run, permission answers in either shape, keyword errors at the
call, a daemon that cannot start, and ``@client.tool``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from cleveragents.client import Client, DaemonStartError
from kit.models import scripted

WRITE = {"name": "builtin/file-write", "arguments": {"path": "out.txt", "content": "x"}}


async def test_cancelling_the_task_that_awaits_run_cancels_the_run_on_the_daemon(
    tmp_path: Path,
) -> None:
    called = asyncio.Event()

    async def wait_forever(arguments: dict[str, Any]) -> Any:
        called.set()
        await asyncio.Event().wait()

    model = scripted({"toolCalls": [{"name": "client/wait", "arguments": {}}]},
                     {"toolCalls": [WRITE]}, {"content": "done"})  # fmt: skip
    async with await Client.spawn(tmp_path, state_dir=tmp_path / "state") as client:
        await client.register_tool("client/wait", "Wait.", {"type": "object"}, wait_forever,
                                   annotations={"readOnly": True})  # fmt: skip
        task = asyncio.ensure_future(
            client.run("go", model=model, run_id="r1", automation_profile="full-auto")
        )
        async with asyncio.timeout(10):
            await called.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        result = await client.get("r1")  # already ended: the task waited for it
    assert result["status"] == "cancelled"
    assert not (tmp_path / "out.txt").exists()


async def test_a_permission_handler_may_answer_an_outcome_or_the_wire_object(
    tmp_path: Path,
) -> None:
    async def wire_shape(params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": "allow_once"}

    answers: list[Any] = ["allow_once", {"outcome": "allow_once"}, wire_shape]
    model = scripted({"toolCalls": [WRITE]}, {"content": "done"})
    async with await Client.spawn(tmp_path, state_dir=tmp_path / "s", permissions=True) as client:
        for number, answer in enumerate(answers):
            client.permission_handler = answer if callable(answer) else lambda p, a=answer: a
            result = await client.run("go", model=model)
            assert result["toolCallHistory"][0]["success"] is True, number
            (tmp_path / "out.txt").unlink()


@pytest.mark.parametrize("answer", [True, None, {"allow": True}, "yes"])
async def test_any_other_permission_answer_is_a_type_error_from_run(
    tmp_path: Path, answer: Any
) -> None:
    model = scripted({"toolCalls": [WRITE]}, {"toolCalls": [WRITE]}, {"content": "done"})
    async with await Client.spawn(tmp_path, state_dir=tmp_path / "s", permissions=True) as client:
        client.permission_handler = lambda params: answer
        with pytest.raises(TypeError, match="permission_handler"):
            await client.run("go", model=model, runId="bad")
        result = await client.get("bad")
    assert result["status"] == "cancelled"  # the run did not go on without its handler
    assert not (tmp_path / "out.txt").exists()


async def test_run_takes_python_and_wire_names_and_refuses_unknown_keywords(
    tmp_path: Path,
) -> None:
    model = scripted({"toolCalls": [{"name": "builtin/file-list", "arguments": {}}]})
    async with await Client.spawn(tmp_path, state_dir=tmp_path / "s", model=model) as client:
        python = await client.run("go", max_iterations=2)
        camel = await client.run("go", maxIterations=1)
        with pytest.raises(TypeError, match="max_iteration"):
            await client.run("go", max_iteration=2)
        with pytest.raises(TypeError, match="twice"):
            await client.run("go", max_iterations=2, maxIterations=2)
    assert (python["status"], python["iterations"]) == ("limit", 2)
    assert (camel["status"], camel["iterations"]) == ("limit", 1)


async def test_a_daemon_that_cannot_start_is_reported_with_its_exit_code_and_stderr(
    tmp_path: Path,
) -> None:
    fails = [sys.executable, "-c",
             "import sys; sys.stderr.write('line one\\nboom: bad config\\n'); sys.exit(3)"]  # fmt: skip
    with pytest.raises(DaemonStartError) as info:
        await Client.spawn(tmp_path, command=fails, on_stderr=None)
    assert info.value.returncode == 3
    assert info.value.stderr_tail == "line one\nboom: bad config"
    assert "code 3" in str(info.value)
    assert "boom: bad config" in str(info.value)
    assert isinstance(info.value, ConnectionError)


async def test_client_tool_infers_its_schema_and_is_called_with_keywords(tmp_path: Path) -> None:
    model = scripted(
        {"toolCalls": [{"name": "client/add", "arguments": {"a": 2, "b": 3}},
                       {"name": "math/scale", "arguments": {"x": 2.5}}]},
        {"content": "done"},
    )  # fmt: skip
    async with await Client.spawn(tmp_path, state_dir=tmp_path / "s", model=model) as client:

        @client.tool(annotations={"readOnly": True})
        def add(a: int, b: int = 0) -> int:
            """Add two numbers.

            Args:
                a: the first number
                b: the second number
            """
            return a + b

        @client.tool(name="math/scale", annotations={"readOnly": True},
                     input_schema={"type": "object", "properties": {"x": {"type": "number"}}})  # fmt: skip
        async def scale(x: float) -> float:
            return x * 2

        result = await client.run("go")
        listed = {t["name"]: t for t in await client.list_tools()}
    assert [r["output"] for r in result["toolCallHistory"]] == [5, 5.0]
    assert add(1, 1) == 2  # the decorator returns the function itself
    assert listed["client/add"]["description"] == "Add two numbers."
    assert listed["client/add"]["inputSchema"] == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "the first number"},
            "b": {"type": "integer", "description": "the second number", "default": 0},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert listed["math/scale"]["inputSchema"]["properties"] == {"x": {"type": "number"}}


def test_the_client_s_run_events_are_every_notification_a_run_sends() -> None:
    """The client routes exactly the notifications that carry a run's ``runId`` and
    ``seq`` (derived here from the wire classes, apart from the event table)."""
    import attrs

    from cleveragents.client._client import RUN_EVENTS
    from cleveragents.protocol import METHODS

    per_run = {
        method.name for method in METHODS
        if method.kind == "notification" and method.direction == "daemon->client"
        and {"run_id", "seq"} <= {f.name for f in attrs.fields(method.params)}
    }  # fmt: skip
    assert per_run == RUN_EVENTS
    assert {"run/started", "run/reasoningDelta", "run/compacted", "run/finished"} <= per_run


async def test_a_run_s_listener_hears_the_reasoning_before_the_text(tmp_path: Path) -> None:
    heard: list[tuple[str, str]] = []

    def listen(method: str, params: dict[str, Any]) -> None:
        if method in ("run/reasoningDelta", "run/messageDelta"):
            heard.append((method, params["text"]))

    model = scripted({"reasoning": "Think twice.", "content": "Said once."})
    async with await Client.spawn(tmp_path, state_dir=tmp_path / "state") as client:
        result = await client.run("go", model=model, on_event=listen)
    assert heard == [("run/reasoningDelta", "Think twice."), ("run/messageDelta", "Said once.")]
    assert result["content"] == "Said once."
