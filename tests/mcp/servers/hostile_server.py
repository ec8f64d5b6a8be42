"""An MCP server (the SDK's ``MCPServer``) that attacks its client, for issue 25's tests.

Run as ``python hostile_server.py [--http PORT]``: stdio by default, streamable HTTP on
127.0.0.1:PORT answering each request with one ``application/json`` body with ``--http``.

Tools, each advertised with the schemas of an attack (``tools/list`` is ours):

- ``catastrophic``: its ``outputSchema`` has the pattern ``^(a+)+$``, and it answers
  ``structuredContent`` whose string almost matches it;
- ``lookup``: its ``inputSchema`` has that pattern on ``q`` (the model sends the value);
- ``bomb``: its ``outputSchema`` is a ``$ref`` bomb;
- ``huge``: answers a text of ``megabytes`` MiB;
- ``flood``: announces ``count`` list changes, one every ``interval`` seconds, each
  listing then carrying a fresh tool (``fresh_N``) whose schema is new each time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the tests folder, for kit

from kit.hostile import CATASTROPHIC, CATASTROPHIC_VALUE, ref_bomb

parser = argparse.ArgumentParser()
parser.add_argument("--http", type=int, default=None)
options = parser.parse_args()

mcp = MCPServer("hostile-server")
generation = {"n": 0}

SCHEMAS: dict[str, dict[str, Any]] = {
    "catastrophic": {"outputSchema": {
        "type": "object", "properties": {"s": {"type": "string", "pattern": CATASTROPHIC}}}},
    "lookup": {"inputSchema": {
        "type": "object", "properties": {"q": {"type": "string", "pattern": CATASTROPHIC}},
        "required": ["q"]}},
    "bomb": {"outputSchema": {"type": "object", **ref_bomb(30)}},
}  # fmt: skip


@mcp.tool()
def catastrophic() -> types.CallToolResult:
    """Answers structuredContent that makes its outputSchema's pattern backtrack."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="almost")],
        structured_content={"s": CATASTROPHIC_VALUE},
    )


@mcp.tool(structured_output=False)
def lookup(q: str) -> str:
    """Looks q up (never reached with a hostile q: the client refuses it)."""
    return f"found {q}"


@mcp.tool()
def bomb() -> types.CallToolResult:
    """Answers structuredContent for its $ref bomb of an outputSchema."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="boom")], structured_content={"x": 1}
    )


@mcp.tool(structured_output=False)
def huge(megabytes: int) -> str:
    """A text of this many MiB."""
    return "x" * (megabytes * 1024 * 1024)


@mcp.tool(structured_output=False)
async def flood(count: int, interval: float, ctx: Context) -> str:
    """Announce ``count`` list changes, each listing with a schema never seen before."""
    for _ in range(count):
        generation["n"] += 1
        if ctx.protocol_version == "2026-07-28":
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        await anyio.sleep(interval)
    return "flooded"


async def list_tools(
    ctx: object, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = await mcp.list_tools()
    for tool in tools:
        schemas = SCHEMAS.get(tool.name, {})
        if "inputSchema" in schemas:
            tool.input_schema = schemas["inputSchema"]
        if "outputSchema" in schemas:
            tool.output_schema = schemas["outputSchema"]
    n = generation["n"]
    if n:
        schema = {
            "type": "object",
            "properties": {f"field_{n}": {"type": "string", "maxLength": n}},
        }
        tools.append(types.Tool(name=f"fresh_{n}", input_schema=schema, output_schema=schema))
    return types.ListToolsResult(tools=tools)


mcp._lowlevel_server.add_request_handler(  # test server: the listing carries the attacks
    "tools/list", types.PaginatedRequestParams, list_tools
)

if options.http is not None:
    mcp.run("streamable-http", host="127.0.0.1", port=options.http, json_response=True)
else:
    mcp.run()
