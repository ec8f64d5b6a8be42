"""Through the real daemon: a bad header part is logged on stderr and skipped, and the
next request on the same connection is answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.rawpeer import RawDaemon

BAD = {
    "negative length": b"Content-Length: -5\r\n\r\n",
    "length not a number": b"Content-Length: abc\r\n\r\nabc",
    "bare garbage": b"abc",
    "missing length": b"Content-Type: application/json\r\n\r\n{}",
    "200 MB length": b"Content-Length: 209715200\r\n\r\n{}",
}


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
async def test_the_request_after_a_bad_header_is_answered(
    bad: bytes, workspace: Path, state_dir: Path
) -> None:
    daemon = await RawDaemon.start(workspace, state_dir, options={"stateDir": str(state_dir)})
    try:
        daemon.write(bad)
        reply = await daemon.call(2, "tools/list", {})
        assert "result" in reply, reply
        assert reply["result"]["tools"]
        assert daemon.process.stdin is not None
        daemon.process.stdin.close()
        await daemon.wait_exit(10)
        assert "bad frame header" in await daemon.stderr()
    finally:
        await daemon.kill()
