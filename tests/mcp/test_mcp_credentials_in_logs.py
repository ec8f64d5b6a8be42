"""An MCP server's URL may carry credentials (``user:pass@``, ``?api_key=``): none of
them reaches the daemon's log, at DEBUG, whichever logger writes the line (the MCP SDK's,
the HTTP stack's, ours), from the first line on, with no model adapter ever built."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kit.mcp import http_server
from kit.rawpeer import RawDaemon

PASSWORD = "hunter2-in-the-url"
API_KEY = "api-key-in-the-query-0123"


async def test_no_log_line_of_a_run_carries_an_mcp_url_s_credentials(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with http_server(tmp_path) as web:
        url = web.url.replace("http://", f"http://someone:{PASSWORD}@") + f"?api_key={API_KEY}"
        entry = {"name": "web", "url": url}
        daemon = await RawDaemon.start(
            workspace, tmp_path / "state", "--log-level", "debug", options={"mcpServers": [entry]}
        )
        try:
            reply = await daemon.call(2, "run/start", {"prompt": "add", "model": {
                "provider": "scripted", "script": [
                    {"toolCalls": [{"name": "mcp:web/add", "arguments": {"a": 1, "b": 2}}]},
                    {"content": "done"}]}})  # fmt: skip
            assert reply["result"]["status"] == "completed"
            assert reply["result"]["toolCallHistory"][0]["output"] == {"result": 3}
            await daemon.call(3, "shutdown", None)
            daemon.send({"jsonrpc": "2.0", "method": "exit"})
            await daemon.wait_exit(10)
        finally:
            await daemon.kill()
        log = await asyncio.wait_for(daemon.stderr(), 10)
    assert "DEBUG" in log  # the lines were written: the check below reads them
    assert "127.0.0.1" in log
    assert PASSWORD not in log
    assert API_KEY not in log
