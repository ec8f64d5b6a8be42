"""The loopback callback is reachable by any local program: whatever bytes reach it, it
answers (or closes) without raising, and it completes the sign-in only for a ``GET
/callback`` carrying exactly the ``state`` in progress (hypothesis at the seam)."""

from __future__ import annotations

import asyncio
import contextlib

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents.mcp._oauth import LoopbackCallback

STATE = "the-state-in-progress"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_any_target_is_refused_unless_it_carries_the_state(target: str) -> None:
    callback = LoopbackCallback()
    callback.expect(STATE)
    status, _page = callback._take(target)
    if status.startswith("200"):
        assert f"state={STATE}" in target
        assert target.startswith("/callback?")
    assert status.split()[0] in ("200", "400", "404")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=12_000))
def test_any_bytes_on_the_socket_leave_the_listener_answering(data: bytes) -> None:
    async def scenario() -> None:
        callback = LoopbackCallback()
        async with contextlib.AsyncExitStack() as stack:
            tasks = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tasks.cancel_scope.cancel)
            await callback.listen(stack, tasks, None)
            callback.expect(STATE)
            reader, writer = await asyncio.open_connection("127.0.0.1", callback.port)
            writer.write(data)
            writer.write_eof()
            with contextlib.suppress(ConnectionError):
                await asyncio.wait_for(reader.read(), 15)
            writer.close()
            # Still listening, and the real callback still completes the sign-in.
            reader, writer = await asyncio.open_connection("127.0.0.1", callback.port)
            writer.write(f"GET /callback?code=c&state={STATE} HTTP/1.1\r\n\r\n".encode())
            answer = await asyncio.wait_for(reader.read(), 15)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 200")
            result = await callback.result()
            assert not isinstance(result, str)
            assert result.code == "c"

    asyncio.run(scenario())
