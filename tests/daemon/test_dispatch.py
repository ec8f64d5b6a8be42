"""The dispatcher in process: every message class that once killed, hung or silenced the
daemon, and a hypothesis fuzz of the whole JSON-RPC boundary.

The seam is ``Dispatcher.receive(bytes)`` over the real server (``create_server``): the
same code path as the daemon subprocess, without the subprocess.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents.protocol import BY_NAME, camel
from cleveragents.rpc._dispatch import MAX_DEPTH, Dispatcher
from kit.inprocess import Sink, in_process_daemon
from kit.rawpeer import body as _body

STANDARD_CODES = {-32700, -32600, -32601, -32602, -32603, -32800, -32002}
DAEMON_CODES = set(range(-32029, -32009))


async def _daemon(tmp_path: Path) -> tuple[Dispatcher, Sink]:
    return await in_process_daemon(tmp_path)  # type: ignore[no-any-return]


async def _settle(dispatcher: Dispatcher) -> None:
    await dispatcher.settle(timeout=5)


async def _still_serves(dispatcher: Dispatcher, sink: Sink, msg_id: str = "probe") -> None:
    dispatcher.receive(_body({"jsonrpc": "2.0", "id": msg_id, "method": "tools/list",
                              "params": {}}))  # fmt: skip
    await _settle(dispatcher)
    (reply,) = sink.replies(msg_id)
    assert "builtin/file-read" in [t["name"] for t in reply["result"]["tools"]]


async def test_replies_with_odd_ids_or_errors_are_dropped_and_the_daemon_goes_on(
    tmp_path: Path,
) -> None:
    dispatcher, sink = await _daemon(tmp_path)
    for message in (
        {"jsonrpc": "2.0", "id": {"a": 1}, "result": 1},
        {"jsonrpc": "2.0", "id": [1], "result": 1},
        {"jsonrpc": "2.0", "id": "init", "result": 1},  # a client's own id
        {"jsonrpc": "2.0", "id": True, "result": 1},
        {"jsonrpc": "2.0", "id": 1.0, "error": "boom"},
        {"jsonrpc": "2.0", "id": "ca-1", "error": 5},
        {"jsonrpc": "2.0", "id": "ca-1", "error": []},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": {"x": 1}}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": [1]}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": []},
    ):
        before = len(sink.frames)
        dispatcher.receive(_body(message))
        assert len(sink.frames) == before  # nothing to answer: dropped, not a crash
    await _still_serves(dispatcher, sink)


async def test_a_reply_is_matched_only_by_an_id_the_daemon_issued(tmp_path: Path) -> None:
    dispatcher, _sink = await _daemon(tmp_path)
    msg_id, future = dispatcher.request("tools/call", {"x": 1})
    assert msg_id.startswith("ca-")
    assert len(msg_id) > 12  # not guessable like "ca-1"
    dispatcher.receive(_body({"jsonrpc": "2.0", "id": "ca-1", "result": "forged"}))
    assert not future.done()
    dispatcher.receive(_body({"jsonrpc": "2.0", "id": msg_id, "error": "boom"}))
    assert future.done()
    exc = future.exception()
    assert exc is not None
    assert getattr(exc, "code", None) == -32603


async def test_deep_nesting_is_a_parse_error_naming_the_limit(tmp_path: Path) -> None:
    dispatcher, sink = await _daemon(tmp_path)
    for depth in (MAX_DEPTH + 1, 978, 100_000):
        dispatcher.receive(b"[" * depth + b"]" * depth)
        error = sink.frames[-1]["error"]
        assert error["code"] == -32700
        assert str(MAX_DEPTH) in error["message"]
    await _still_serves(dispatcher, sink)


async def test_non_json_numbers_and_invalid_unicode_are_clean_errors(tmp_path: Path) -> None:
    dispatcher, sink = await _daemon(tmp_path)
    dispatcher.receive(b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"a":NaN}}')
    assert sink.frames[-1]["error"]["code"] == -32700
    dispatcher.receive(b'{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"a":Infinity}}')
    assert sink.frames[-1]["error"]["code"] == -32700
    dispatcher.receive(b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list","params":{}}')
    assert sink.frames[-1] == {"jsonrpc": "2.0", "id": None, "error": sink.frames[-1]["error"]}
    assert sink.frames[-1]["error"]["code"] == -32600
    dispatcher.receive(
        b'{"jsonrpc":"2.0","id":7,"method":"run/start","params":{"prompt":"\\udc00"}}'
    )
    reply = sink.frames[-1]
    assert reply["id"] == 7
    assert reply["error"]["code"] == -32602
    assert "Traceback" not in json.dumps(reply)
    dispatcher.receive(b'{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{}}\xff')
    assert sink.frames[-1]["error"]["code"] == -32700
    await _still_serves(dispatcher, sink)


async def test_lifecycle_and_id_rules(tmp_path: Path) -> None:
    dispatcher, sink = await _daemon(tmp_path)
    dispatcher.receive(_body({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
    assert sink.replies(1)[0]["error"]["code"] == -32600  # already initialized
    for n, method in enumerate(("initialized", "$/cancelRequest", "exit", "llm/delta")):
        dispatcher.receive(_body({"jsonrpc": "2.0", "id": 10 + n, "method": method,
                                  "params": {}}))  # fmt: skip
        assert sink.replies(10 + n)[0]["error"]["code"] == -32600
    assert not dispatcher.ended.done()  # a request named "exit" does not stop the daemon
    # A request reusing a pending id is refused; the pending one still gets its answer.
    dispatcher.receive(_body({"jsonrpc": "2.0", "id": "r", "method": "run/get",
                              "params": {"runId": "nope"}}))  # fmt: skip
    dispatcher.receive(_body({"jsonrpc": "2.0", "id": "r", "method": "tools/list",
                              "params": {}}))  # fmt: skip
    await _settle(dispatcher)
    codes = sorted(reply["error"]["code"] for reply in sink.replies("r"))
    assert codes == [-32600, -32022]
    # Lua's empty table: [] reads as {} for a method whose params are all optional.
    dispatcher.receive(_body({"jsonrpc": "2.0", "id": "lua", "method": "tools/list",
                              "params": []}))  # fmt: skip
    await _settle(dispatcher)
    assert "result" in sink.replies("lua")[0]
    await _still_serves(dispatcher, sink)


async def test_a_schema_that_is_not_json_schema_is_invalid_params_naming_the_field(
    tmp_path: Path,
) -> None:
    dispatcher, sink = await _daemon(tmp_path)
    cases = [
        ({"type": "object", "properties": []}, "params.tools[0].inputSchema.properties:"),
        ({"type": 5}, "params.tools[0].inputSchema.type:"),
        ({"properties": {"my_name": {"type": "string", "pattern": "("}}},
         "params.tools[0].inputSchema.properties.my_name.pattern:"),
        ({"$ref": "http://127.0.0.1:9/schema.json"}, "params.tools[0].inputSchema:"),
    ]  # fmt: skip
    for n, (schema, field) in enumerate(cases):
        dispatcher.receive(_body({"jsonrpc": "2.0", "id": n, "method": "tools/register",
                                  "params": {"tools": [{"name": f"t{n}", "description": "d",
                                                        "inputSchema": schema}]}}))  # fmt: skip
        await _settle(dispatcher)
        error = sink.replies(n)[0]["error"]
        assert error["code"] == -32602
        assert error["message"].startswith(field), error["message"]
    dispatcher.receive(_body({"jsonrpc": "2.0", "id": "out", "method": "tools/register",
                              "params": {"tools": [{"name": "t", "description": "d",
                                                    "inputSchema": {"type": "object"},
                                                    "outputSchema": {"required": "x"}}]}}))  # fmt: skip
    await _settle(dispatcher)
    error = sink.replies("out")[0]["error"]
    assert error["code"] == -32602
    assert error["message"].startswith("params.tools[0].outputSchema.required:")
    await _still_serves(dispatcher, sink)


async def test_cancel_request_reaches_only_the_clients_own_requests(tmp_path: Path) -> None:
    dispatcher, sink = await _daemon(tmp_path)
    msg_id, future = dispatcher.request("tools/call", {})
    dispatcher.receive(_body({"jsonrpc": "2.0", "method": "$/cancelRequest",
                              "params": {"id": msg_id}}))  # fmt: skip
    assert not future.done()  # the daemon's own request is not the client's to cancel
    dispatcher.cancel_request(msg_id, {"runId": "r1", "callId": "c1"})
    assert sink.frames[-1]["params"] == {"id": msg_id, "runId": "r1", "callId": "c1"}


# -- the fuzz ----------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
ids = st.one_of(json_values, st.integers(-3, 3), st.sampled_from(["ca-1", "x", ""]))
methods = st.one_of(
    st.sampled_from([*BY_NAME, "initialize", "initialized", "shutdown", "exit",
                     "$/cancelRequest", "$/setTrace", "workspace/didChangeWorkspaceFolders",
                     "window/workDoneProgress/cancel", "nope/nope"]),
    json_values,
)  # fmt: skip
members = st.fixed_dictionaries(
    {},
    optional={"jsonrpc": st.one_of(st.just("2.0"), json_values), "id": ids, "method": methods,
              "params": json_values, "result": json_values, "error": json_values},
)  # fmt: skip
raw_bodies = st.one_of(
    members.map(lambda m: json.dumps(m).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40),
    st.integers(1, 2000).map(lambda n: b"[" * n),
    st.sampled_from([b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list","params":{}}',
                     b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":NaN}}']),
)  # fmt: skip


def _not_json(name: str) -> Any:
    raise ValueError(name)


def _is_request(body: bytes) -> Any:
    """The id a well-formed request carries (its answer must carry it), else None."""
    try:
        data = json.loads(body, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return None  # not JSON: answered with id null
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        return None
    msg_id, method = data.get("id"), data.get("method")
    if not isinstance(method, str) or method == "exit":
        return None
    if isinstance(msg_id, bool) or not isinstance(msg_id, (str, int)):
        return None
    if "\\ud8" in body.decode("utf-8", "replace").lower():
        return None
    return msg_id


# 1,500 examples take ~20 s alone and twice that beside three other workers on 2 cores:
# more room than the suite's 60 s per test.
@pytest.mark.timeout(240)
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(bodies=st.lists(raw_bodies, min_size=1, max_size=6))
def test_fuzz_every_request_gets_one_answer_and_the_daemon_still_serves(
    tmp_path: Path, bodies: list[bytes]
) -> None:
    async def scenario() -> None:
        dispatcher, sink = await _daemon(tmp_path)
        expected: list[Any] = []
        for n, body in enumerate(bodies):
            request_id = _is_request(body)
            if request_id is not None:
                # Distinct ids per case, so that "exactly one answer" is checkable.
                data = json.loads(body)
                data["id"] = f"{n}:{request_id!r}"
                body = json.dumps(data).encode()
                expected.append(data["id"])
            dispatcher.receive(body)
            if dispatcher.ended.done():
                break
        # Nothing a client sends leaves a request unanswered: cancel what still runs.
        await dispatcher.close(timeout=2)
        await dispatcher._handlers.close()  # type: ignore[attr-defined]  # MCP servers a case added
        for msg_id in expected:
            replies = sink.replies(msg_id)
            if dispatcher.ended.done() and not replies:
                continue  # sent after exit: never read
            assert len(replies) == 1, (msg_id, replies)
            error = replies[0].get("error")
            if error is not None:
                assert error["code"] in STANDARD_CODES | DAEMON_CODES
                assert "Traceback" not in error["message"]
        if dispatcher.state == "ready":
            await _still_serves(dispatcher, sink, msg_id="after-fuzz")

    asyncio.run(scenario())


# -- the fuzz, mid-run: replies and cancels aimed at requests really pending ---------------

REQUESTS = [m for m in BY_NAME.values() if m.kind == "request" and m.direction == "client->daemon"]


def _shaped_params(method: Any, values: list[Any], keep: list[bool]) -> dict[str, Any]:
    """Params with the method's own field names (camelCase), each present or not, holding
    any JSON value: what a confused or hostile client sends."""
    fields = [camel(f.name) for f in attrs.fields(method.params)]
    return {name: values[i % len(values)] for i, name in enumerate(fields) if keep[i % len(keep)]}


finite_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)  # fmt: skip
"""Valid JSON values only: here every request must reach its method (non-JSON numbers are
the first fuzz's business)."""

actions = st.one_of(
    st.tuples(st.just("reply"), st.integers(0, 5), finite_values, st.booleans()),
    st.tuples(st.just("cancel"), st.sampled_from(["start", "ours", "other"]), st.integers(0, 5)),
    st.tuples(st.just("request"), st.sampled_from(REQUESTS),
              st.lists(finite_values, min_size=1, max_size=4),
              st.lists(st.booleans(), min_size=1, max_size=4)),
)  # fmt: skip


@pytest.mark.timeout(240)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(steps=st.lists(actions, min_size=1, max_size=8))
def test_fuzz_mid_run_replies_and_cancels_aimed_at_pending_requests(
    tmp_path: Path, steps: list[Any]
) -> None:
    async def scenario() -> None:
        fresh = tmp_path / uuid.uuid4().hex  # hypothesis reuses tmp_path across examples
        fresh.mkdir()
        dispatcher, sink = await _daemon(fresh)
        asked_once = asyncio.Event()
        write = sink.write

        def watch(data: bytes) -> None:
            write(data)
            if sink.frames[-1].get("method") == "tools/call":
                asked_once.set()

        sink.write = watch  # type: ignore[method-assign]
        tool = {"name": "client/t", "description": "d", "inputSchema": {"type": "object"},
                "annotations": {"readOnly": True}}  # fmt: skip
        dispatcher.receive(_body({"jsonrpc": "2.0", "id": "reg", "method": "tools/register",
                                  "params": {"tools": [tool]}}))  # fmt: skip
        calls = [{"name": "client/t", "arguments": {"n": n}} for n in range(3)]
        script = [{"toolCalls": calls}, {"toolCalls": calls}, {"content": "done"}]
        dispatcher.receive(_body({"jsonrpc": "2.0", "id": "start", "method": "run/start",
                                  "params": {"prompt": "go", "runId": "fz", "model": {
                                      "provider": "scripted", "script": script}}}))  # fmt: skip
        await asyncio.wait_for(asked_once.wait(), 10)  # the run reached its tools/call
        expected = ["reg", "start"]
        for n, step in enumerate(steps):
            asked = [f["id"] for f in sink.frames if f.get("method") == "tools/call"]
            if step[0] == "reply" and asked:
                _, pick, value, as_error = step
                member = {"error": value} if as_error else {"result": value}
                dispatcher.receive(_body({"jsonrpc": "2.0", "id": asked[pick % len(asked)],
                                          **member}))  # fmt: skip
            elif step[0] == "cancel":
                _, target, pick = step
                msg_id = {"start": "start", "ours": asked[pick % len(asked)] if asked else 0,
                          "other": pick}[target]  # fmt: skip
                dispatcher.receive(_body({"jsonrpc": "2.0", "method": "$/cancelRequest",
                                          "params": {"id": msg_id}}))  # fmt: skip
            elif step[0] == "request":
                _, method, values, keep = step
                msg_id = f"q{n}"
                params = _shaped_params(method, values, keep)
                if method.name == "run/start":
                    params["model"] = {"provider": "scripted", "script": [{"content": "x"}]}
                dispatcher.receive(_body({"jsonrpc": "2.0", "id": msg_id, "method": method.name,
                                          "params": params}))  # fmt: skip
                expected.append(msg_id)
            await asyncio.sleep(0)
        dispatcher.receive(_body({"jsonrpc": "2.0", "id": "stop", "method": "run/cancel",
                                  "params": {"runId": "fz"}}))  # fmt: skip
        await dispatcher.settle(timeout=10)
        await dispatcher.close(timeout=2)
        await dispatcher._handlers.close()  # type: ignore[attr-defined]  # MCP servers a case added
        for msg_id in expected:
            replies = sink.replies(msg_id)
            assert len(replies) == 1, (msg_id, replies)
            error = replies[0].get("error")
            if error is not None:
                assert error["code"] in STANDARD_CODES | DAEMON_CODES, error
                assert "Traceback" not in error["message"]
        start = sink.replies("start")[0]
        assert "result" in start or start["error"]["code"] == -32800
        finished = sink.notifications("run/finished")
        if "result" in start:
            assert len(finished) == 1
            assert finished[0]["result"] == start["result"]
        else:  # cancelled: before the run existed (nothing sent for it), or during it
            assert len(finished) <= 1

    asyncio.run(scenario())
