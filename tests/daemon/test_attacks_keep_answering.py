"""The real daemon keeps answering while a hostile schema or MCP server attacks it (issue
25, acceptance): a client tool whose schema has a catastrophic pattern called with a
hostile argument, and an MCP server with catastrophic input and output patterns and a
``$ref`` bomb that then floods ``tools/list_changed``. Meanwhile ``tools/list`` is asked
again and again: the median answer comes within 100 ms and none takes seconds, and the
daemon's resident memory grows by less than 64 MiB. (Before these fixes the first attack
alone froze the daemon for hours.)

Medians, not every probe, are held to 100 ms: the tests share two cores with other
workers, and one probe may land while the machine is busy elsewhere."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from cleveragents.protocol import methods as m
from kit.hostile import CATASTROPHIC, CATASTROPHIC_VALUE, OWASP_EMAIL, OWASP_VALUE
from kit.hostile_mcp import HOSTILE_SERVER
from kit.lsp import Session
from kit.models import call, scripted
from kit.wait import WAIT_S

MEDIAN_S = 0.1
WORST_S = 5.0
MEMORY_BOUND_KIB = 64 * 1024
"""How much the daemon's resident memory may grow during one attack (docs/security.md §9):
without the bounds, a flood of new schemas or a huge answer grows it without end."""


def _rss_kib(session: Session) -> int:
    """The daemon subprocess's resident memory."""
    pid = session.client._server.pid  # type: ignore[union-attr]
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _probe_while(session: Session, work: asyncio.Future[Any]) -> list[float]:
    """``tools/list`` asked again and again until ``work`` is done; each answer's time.
    The daemon's memory is sampled meanwhile and held to ``MEMORY_BOUND_KIB``."""
    times: list[float] = []
    before = peak = _rss_kib(session)
    while not work.done() or len(times) < 5:
        asked = time.perf_counter()
        await session.request(m.TOOLS_LIST, {})
        times.append(time.perf_counter() - asked)
        peak = max(peak, _rss_kib(session))
        await asyncio.sleep(0.02)
    assert peak - before < MEMORY_BOUND_KIB, (before, peak)
    return times


def _assert_answered(times: list[float]) -> None:
    assert statistics.median(times) <= MEDIAN_S, sorted(times)[-5:]
    assert max(times) <= WORST_S, sorted(times)[-5:]


async def test_a_client_tools_catastrophic_pattern_does_not_stop_the_daemon(
    session: Session,
) -> None:
    schema = {"type": "object", "properties": {
        "q": {"type": "string", "pattern": CATASTROPHIC},
        "email": {"type": "string", "pattern": OWASP_EMAIL}}}  # fmt: skip
    await session.request(m.TOOLS_REGISTER, {"tools": [
        {"name": "client/find", "description": "Find.", "inputSchema": schema}]})  # fmt: skip
    model = scripted(
        *[{"toolCalls": [call("client/find", q=CATASTROPHIC_VALUE),
                         call("client/find", email=OWASP_VALUE)]}] * 20,
        {"content": "done"},
    )  # fmt: skip
    run = session.start(model=model, runId="redos")
    times = await _probe_while(session, run)
    result = await run
    assert result["status"] == "completed"
    records = result["toolCallHistory"]
    assert len(records) == 40
    assert not any(r["success"] for r in records)
    assert all("must match pattern" in r["error"] for r in records)
    assert session.tool_calls == []  # no hostile argument reached the client
    _assert_answered(times)


async def test_a_hostile_mcp_server_does_not_stop_the_daemon(session: Session) -> None:
    # The SDK server's imports alone take seconds of CPU on a machine busy with tests.
    hostile = {"name": "h", "command": sys.executable, "args": [str(HOSTILE_SERVER)],
               "startupTimeoutMs": int(WAIT_S * 1000)}  # fmt: skip
    await session.request(m.MCP_ADD, {"servers": [hostile]})
    await session.wait_for(lambda method, p: method == m.TOOLS_CHANGED and p["server"] == "h",
                           timeout=WAIT_S + 5)  # fmt: skip
    status = (await session.request(m.MCP_SERVERS, {}))["servers"][0]
    assert status["status"] == "ready", status
    model = scripted(
        {"toolCalls": [call("mcp:h/catastrophic"), call("mcp:h/lookup", q=CATASTROPHIC_VALUE),
                       call("mcp:h/bomb")]},
        {"toolCalls": [call("mcp:h/flood", count=5000, interval=0.005)]},
        {"content": "done"},
    )  # fmt: skip
    run = session.start(model=model, runId="hostile-mcp")
    times = await _probe_while(session, run)
    result = await run
    catastrophic, lookup, bomb, flood = result["toolCallHistory"]
    assert catastrophic["success"] is True, catastrophic["error"]  # its mismatch is logged
    assert lookup["success"] is False
    assert "arguments.q must match pattern" in lookup["error"]
    assert bomb["success"] is True  # its outputSchema was refused: answers are unchecked
    assert flood["success"] is False
    status = (await session.request(m.MCP_SERVERS, {}))["servers"][0]
    assert status["status"] == "failed"
    assert "tools/list_changed" in status["error"]
    _assert_answered(times)


def _heavy_schema(seed: int) -> dict[str, Any]:
    """A valid schema of about 100 KB whose validator takes about half a second of CPU to
    compile (ten definitions of 150 patterned properties each)."""
    definitions = {
        f"d{j}": {"type": "object", "properties": {
            f"p{i}": {"type": "string", "pattern": f"^s{seed}x{i}b+$", "minLength": 1}
            for i in range(150)}}
        for j in range(10)
    }  # fmt: skip
    return {"type": "object", "definitions": definitions,
            "properties": {f"q{j}": {"$ref": f"#/definitions/d{j}"} for j in range(10)}}  # fmt: skip


async def test_client_tool_schemas_compile_off_the_loop_and_still_take_effect_in_order(
    session: Session,
) -> None:
    """A tools/register of large schemas (seconds of compiling) leaves the daemon answering,
    and a run/start sent right behind it, unanswered, still finds the tools."""
    tools = [
        {"name": f"client/heavy{i}", "description": "Heavy.", "inputSchema": _heavy_schema(i)}
        for i in range(2)
    ]
    register = asyncio.ensure_future(session.request(m.TOOLS_REGISTER, {"tools": tools}))
    model = scripted({"toolCalls": [call("client/heavy1")]}, {"content": "done"})
    run = session.start(model=model, runId="behind-register")
    times: list[float] = []
    while not register.done():
        asked = time.perf_counter()
        await session.request(m.MCP_SERVERS, {})
        times.append(time.perf_counter() - asked)
        await asyncio.sleep(0.02)
    assert (await register)["registered"] == [tool["name"] for tool in tools]
    (record,) = (await run)["toolCallHistory"]
    assert record["success"] is True, record["error"]
    assert len(times) >= 3, times  # the loop was free while the schemas compiled
    _assert_answered(times)
