"""What the daemon would have to send but cannot fit one frame: refused up front, or
failed at once, never silently dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents.daemon import create_server
from cleveragents.protocol import RpcError
from cleveragents.rpc._dispatch import Dispatcher
from kit.inprocess import Sink, in_process_daemon
from kit.rawpeer import body


@pytest.mark.parametrize(("cap", "accepted"), [(16 * 1024 * 1024, True),
                                               (16 * 1024 * 1024 + 1, False), (0, False)])  # fmt: skip
async def test_the_output_cap_is_bounded_so_every_record_fits_a_frame(
    tmp_path: Path, cap: int, accepted: bool
) -> None:
    sink = Sink()
    dispatcher = Dispatcher(create_server(tmp_path / "state"), sink)
    dispatcher.receive(body({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "capabilities": {}, "rootUri": tmp_path.as_uri(),
        "initializationOptions": {"maxToolOutputBytes": cap}}}))  # fmt: skip
    (reply,) = sink.replies(1)
    if accepted:
        assert "result" in reply
    else:
        assert reply["error"]["code"] == -32602
        assert reply["error"]["message"].startswith("initializationOptions.maxToolOutputBytes")


async def test_a_request_to_the_client_over_the_frame_limit_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatcher, sink = await in_process_daemon(tmp_path)
    monkeypatch.setattr(dispatcher, "_max_frame", 4096)
    before = len(sink.frames)
    _msg_id, future = dispatcher.request("llm/generate", {"messages": ["x" * 5000]})
    assert future.done()  # not left pending until a timeout
    with pytest.raises(RpcError) as caught:
        future.result()
    assert caught.value.code == -32603
    assert len(sink.frames) == before  # nothing half-sent
    _msg_id, small = dispatcher.request("llm/generate", {"messages": ["x"]})
    assert not small.done()
    assert sink.frames[-1]["method"] == "llm/generate"
