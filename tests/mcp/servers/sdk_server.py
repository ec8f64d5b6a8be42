"""A real MCP server built with the SDK's ``MCPServer``, for the client tests.

Run as ``python sdk_server.py [--page-size N] [--marker-dir DIR] [--http PORT] [--banner]``:
stdio by default, streamable HTTP on 127.0.0.1:PORT with ``--http``; ``--banner`` prints
two lines that are not JSON-RPC on stdout before serving (the SDK's server moves its own
stdout aside once it runs, so garbage can only reach the wire before that). It speaks both protocol
versions (the SDK's runner picks the era from the client's first request).

Tools: ``add`` (structured, readOnlyHint), ``echo_text`` (one text block), ``picture``
(a text and an image block), ``fail`` (isError), ``bad_output`` (structuredContent
that misses the outputSchema the listing advertises), ``sleep`` (progress every 50 ms;
writes ``DIR/started``, and ``DIR/cancelled`` when cancelled), ``crash`` (stderr line, then exit),
``flood`` (N MiB on stderr), ``add_tool``
(adds a tool, then announces the list change), ``env`` (one environment variable).
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

parser = argparse.ArgumentParser()
parser.add_argument("--page-size", type=int, default=0)
parser.add_argument("--marker-dir", default="")
parser.add_argument("--http", type=int, default=None)
parser.add_argument("--banner", action="store_true")
options = parser.parse_args()

mcp = MCPServer("test-server")
BAD_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@mcp.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool(structured_output=False)
def echo_text(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool(structured_output=False)
def picture() -> list[object]:
    """A caption and a 1x1 PNG."""
    return ["a red dot", Image(data=PNG, format="png")]


@mcp.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@mcp.tool()
def bad_output() -> types.CallToolResult:
    """Answers with structuredContent that does not match the advertised outputSchema."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="count is a word")],
        structured_content={"count": "many"},
    )


@mcp.tool(structured_output=False)
async def sleep(seconds: float, ctx: Context) -> str:
    """Sleep, reporting progress; record the start and a cancellation in the marker
    directory."""
    if options.marker_dir:
        Path(options.marker_dir, "started").write_text("started\n")
    try:
        with anyio.fail_after(seconds):
            step = 0
            while True:
                step += 1
                await ctx.report_progress(step)
                await anyio.sleep(0.05)
    except TimeoutError:
        return "slept"
    except anyio.get_cancelled_exc_class():
        if options.marker_dir:
            Path(options.marker_dir, "cancelled").write_text("cancelled\n")
        raise


@mcp.tool(structured_output=False)
def crash(code: int) -> str:
    """Write a last word to stderr and exit at once."""
    print("about to crash on purpose", file=sys.stderr, flush=True)
    os._exit(code)


@mcp.tool(structured_output=False)
def flood(megabytes: int) -> str:
    """Write this many MiB to stderr."""
    line = b"x" * 1023 + b"\n"
    for _ in range(megabytes * 1024):
        os.write(2, line)
    return "flooded"


@mcp.tool(structured_output=False)
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and announce that the list changed."""

    def added() -> str:
        return f"I am {name}"

    mcp.add_tool(added, name=name, description=f"added at run time: {name}")
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return "added"


@mcp.tool(structured_output=False)
def env(name: str) -> str:
    """One environment variable, or <unset>."""
    return os.environ.get(name, "<unset>")


async def list_tools_paged(
    ctx: object, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    """``tools/list`` in pages of ``--page-size`` (all at once when 0)."""
    tools = await mcp.list_tools()
    for tool in tools:
        if tool.name == "bad_output":
            tool.output_schema = BAD_OUTPUT_SCHEMA
    start = int(params.cursor) if params is not None and params.cursor else 0
    size = options.page_size or len(tools)
    end = start + size
    return types.ListToolsResult(
        tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
    )


mcp._lowlevel_server.add_request_handler(  # test server: page the listing
    "tools/list", types.PaginatedRequestParams, list_tools_paged
)

if options.banner:  # before run(), stdout is still the wire: like many real servers
    print("test-server 1.0 starting, this line is not JSON-RPC", flush=True)
    print('{"json": "but not JSON-RPC"}', flush=True)

if options.http is not None:
    mcp.run("streamable-http", host="127.0.0.1", port=options.http)
else:
    mcp.run()
