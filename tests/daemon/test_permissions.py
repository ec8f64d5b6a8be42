"""Automation profiles through the daemon: permission/request, remembered answers, ci."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from cleveragents.protocol import methods as m
from cleveragents.tool import PermissionQuery, ToolActorContext, ToolPermissionError
from kit.lsp import Session
from kit.models import call, scripted


def writes(*names: str) -> dict[str, object]:
    turns = [{"toolCalls": [call("builtin/file-write", path=n, content=n)]} for n in names]
    return scripted(*turns, {"content": "done"})


async def test_supervised_asks_before_a_write_and_not_before_a_read(session: Session) -> None:
    model = scripted({"toolCalls": [call("builtin/file-read", path="hello.txt"),
                                    call("builtin/file-write", path="new.txt", content="x")]},
                     {"content": "done"})  # fmt: skip
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model, "runId": "p1",
                                                 "automationProfile": "supervised"})  # fmt: skip
    (asked,) = session.permission_requests
    assert (asked["runId"], asked["toolName"]) == ("p1", "builtin/file-write")
    # What the tool will receive: the model's arguments and the run's reserved values.
    assert asked["inputs"] == {"path": "new.txt", "content": "x",
                               "sandbox_root": str(session.workspace), "resource_bindings": {}}  # fmt: skip
    assert "write" in asked["reason"]
    assert "replaced" not in asked["reason"]
    assert asked["callId"] == result["toolCallHistory"][1]["callId"]
    assert [r["success"] for r in result["toolCallHistory"]] == [True, True]
    assert (session.workspace / "new.txt").read_text() == "x"


async def test_the_prompt_shows_the_runs_reserved_values_not_the_models(
    session: Session,
) -> None:
    disguised = call("builtin/file-write", path="new.txt", content="x", sandbox_root="/tmp/safe",
                     resource_bindings={"note": "harmless"})  # fmt: skip
    result = await session.request(m.RUN_START, {
        "prompt": "go", "model": scripted({"toolCalls": [disguised]}, {"content": "done"}),
        "automationProfile": "supervised", "resourceBindings": {"db": "prod"}})  # fmt: skip
    (asked,) = session.permission_requests
    assert asked["inputs"]["sandbox_root"] == str(session.workspace)
    assert asked["inputs"]["resource_bindings"] == {"db": "prod"}
    assert "the model's own resource_bindings and sandbox_root were replaced" in asked["reason"]
    (record,) = result["toolCallHistory"]
    assert record["inputs"]["sandbox_root"] == "/tmp/safe"  # records keep what the model sent
    assert (session.workspace / "new.txt").read_text() == "x"


async def test_reject_once_gives_a_failed_record_and_the_run_continues(session: Session) -> None:
    session.permission_answers[:] = ["reject_once", "allow_once"]
    result = await session.request(m.RUN_START, {"prompt": "go", "model": writes("a.txt", "b.txt"),
                                                 "automationProfile": "supervised"})  # fmt: skip
    first, second = result["toolCallHistory"]
    assert (first["success"], first["errorCode"]) == (False, ToolPermissionError.code)
    assert second["success"] is True
    assert not (session.workspace / "a.txt").exists()
    assert (session.workspace / "b.txt").exists()
    assert result["status"] == "completed"


async def test_allow_always_is_not_asked_again_in_that_run(session: Session) -> None:
    session.permission_answers[:] = ["allow_always"]
    result = await session.request(
        m.RUN_START, {"prompt": "go", "model": writes("a.txt", "b.txt", "c.txt"),
                      "automationProfile": "supervised"})  # fmt: skip
    assert len(session.permission_requests) == 1
    assert all(r["success"] for r in result["toolCallHistory"])
    # A new run asks again: "always" lasts for the run.
    await session.request(m.RUN_START, {"prompt": "go", "model": writes("d.txt"),
                                        "automationProfile": "supervised"})  # fmt: skip
    assert len(session.permission_requests) == 2


async def test_ci_never_sends_permission_requests(session: Session) -> None:
    model = scripted({"toolCalls": [call("builtin/file-write", path="a.txt", content="a"),
                                    call("builtin/shell", command="echo hi")]},
                     {"content": "done"})  # fmt: skip
    result = await session.request(m.RUN_START, {"prompt": "go", "model": model,
                                                 "automationProfile": "ci"})  # fmt: skip
    assert session.permission_requests == []
    write, shell = result["toolCallHistory"]
    assert write["success"] is True
    if shell["success"]:  # bwrap available: ci runs the confined shell
        assert shell["output"]["confined"] is True
    else:
        assert "confined" in shell["error"] or "ci" in shell["error"]


async def test_cancelling_the_run_cancels_a_pending_permission_request(session: Session) -> None:
    session.permission_answers[:] = ["hang"]
    pending = session.start(model=writes("a.txt"), runId="perm-cancel",
                            automationProfile="supervised")  # fmt: skip
    async with asyncio.timeout(10):
        await session.permission_asked.wait()
    await session.request(m.RUN_CANCEL, {"runId": "perm-cancel"})
    async with asyncio.timeout(5):
        result = await pending
    assert result["status"] == "cancelled"
    assert not (session.workspace / "a.txt").exists()


async def test_without_the_permissions_capability_ask_becomes_deny(tmp_path: object) -> None:
    from pathlib import Path

    from kit.rawpeer import RawDaemon

    root = Path(str(tmp_path))
    (root / "ws").mkdir()
    daemon = await RawDaemon.start(root / "ws", root / "state")  # declares no capabilities
    try:
        reply = await daemon.call(2, "run/start", {
            "prompt": "go", "model": writes("a.txt"), "automationProfile": "supervised"})  # fmt: skip
        (record,) = reply["result"]["toolCallHistory"]
        assert (record["success"], record["errorCode"]) == (False, ToolPermissionError.code)
        assert "permissions" in record["error"]  # says why it was not asked
        assert not any(msg.get("method") == m.PERMISSION_REQUEST for msg in daemon.messages)
        assert not (root / "ws" / "a.txt").exists()
    finally:
        await daemon.kill()


async def test_a_custom_profile_from_initialization_options_governs_a_run(tmp_path: object) -> None:
    from pathlib import Path

    from kit.rawpeer import RawDaemon

    root = Path(str(tmp_path))
    (root / "ws").mkdir()
    daemon = await RawDaemon.start(root / "ws", root / "state", options={"profiles": {
        "read-only": {"read": "allow", "write": "deny", "execute": "deny",
                      "description": "look, do not touch"}}})  # fmt: skip
    try:
        reply = await daemon.call(2, "run/start", {
            "prompt": "go", "model": writes("a.txt"), "automationProfile": "read-only"})  # fmt: skip
        (record,) = reply["result"]["toolCallHistory"]
        assert (record["success"], record["errorCode"]) == (False, ToolPermissionError.code)
        assert "read-only" in record["error"]  # names the profile that refused it
        unknown = await daemon.call(3, "run/start", {
            "prompt": "go", "model": writes("a.txt"), "automationProfile": "nope"})  # fmt: skip
        assert unknown["error"]["code"] == -32024
        assert "read-only" in unknown["error"]["message"]  # the valid names include it
    finally:
        await daemon.kill()


def _shell(command: str) -> dict[str, object]:
    return scripted({"toolCalls": [call("builtin/shell", command=command)]}, {"content": "done"})


def test_a_wire_profile_carries_unconfined_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """``unconfinedRoot`` on the wire is the Python profiles' ``unconfined_root``: the one
    way a client lets an unconfined shell run while the daemon is root."""
    from cleveragents.daemon._server import _custom_profiles
    from cleveragents.protocol import structure, wire
    from cleveragents.workspace import ProfilePolicy, ShellTool, get_profile, profiles

    monkeypatch.setattr(profiles, "running_as_root", lambda: True)
    options = structure(
        {"profiles": {
            "root-ok": {"read": "allow", "write": "allow", "execute": "allow",
                        "unconfinedRoot": True},
            "plain": {"read": "allow", "write": "allow", "execute": "allow"}}},
        wire.InitializationOptions,
    )  # fmt: skip
    custom = _custom_profiles(options)
    assert custom is not None
    spec = ShellTool(bwrap=None).spec()
    query = PermissionQuery(spec, {}, "c", 1, ToolActorContext(sandbox_root="/ws"))
    assert get_profile("root-ok", custom).unconfined_root is True
    assert ProfilePolicy(get_profile("root-ok", custom)).authorize(query) is None
    refusal: Any = ProfilePolicy(get_profile("plain", custom)).authorize(query)
    if refusal is not None and not isinstance(refusal, str):
        refusal = asyncio.run(refusal)
    assert isinstance(refusal, str)
    assert "as root" in refusal


@pytest.mark.skipif(os.geteuid() != 0, reason="the daemon must really run as root")
async def test_as_root_only_a_profile_with_unconfined_root_runs_an_unconfined_shell(
    tmp_path: Path,
) -> None:
    from kit.rawpeer import RawDaemon

    (tmp_path / "ws").mkdir()
    daemon = await RawDaemon.start(
        tmp_path / "ws", tmp_path / "state", env={"CLEVERAGENTS_BWRAP": "off"},
        options={"profiles": {"root-ok": {"read": "allow", "write": "allow",
                                          "execute": "allow", "unconfinedRoot": True}}},
    )  # fmt: skip
    try:
        refused = await daemon.call(2, "run/start", {
            "prompt": "go", "model": _shell("touch refused"), "automationProfile": "full-auto"})  # fmt: skip
        (record,) = refused["result"]["toolCallHistory"]
        assert (record["success"], record["errorCode"]) == (False, ToolPermissionError.code)
        assert "as root" in record["error"]
        ran = await daemon.call(3, "run/start", {
            "prompt": "go", "model": _shell("touch ran"), "automationProfile": "root-ok"})  # fmt: skip
        (record,) = ran["result"]["toolCallHistory"]
        assert record["success"] is True, record
        assert (tmp_path / "ws" / "ran").exists()
        assert not (tmp_path / "ws" / "refused").exists()
    finally:
        await daemon.kill()
