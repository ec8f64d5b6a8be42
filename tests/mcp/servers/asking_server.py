"""A real MCP server (the SDK's ``MCPServer``) that asks things of its client while it
serves a call: elicitation in both modes, roots, progress, log messages.

Run as ``python asking_server.py [--http PORT]``. Tools:

- ``ask_name``: a form elicitation for ``{name: string, age?: integer}``; answers
  ``accept:NAME:AGE``, ``decline`` or ``cancel``, or ``error:...`` when the client
  refused the request;
- ``open_link``: a URL elicitation; answers the action;
- ``roots``: the client's roots, one URI a line (``error:...`` if it has none);
- ``wait_roots_change``: waits until ``notifications/roots/list_changed`` arrives, then
  answers the roots as ``roots`` does;
- ``progress``: ``count`` progress notifications as fast as it can (total = count, a
  message on each), then ``done``;
- ``log``: ``count`` log messages of ``size`` characters, then ``logged``;
- ``sample``: asks the client's model (``sampling/createMessage``) to answer ``text``
  (with ``tools: true``, offering it a tool); answers the model's text, or ``error:...``.
"""

from __future__ import annotations

import argparse
import warnings

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

parser = argparse.ArgumentParser()
parser.add_argument("--http", type=int, default=None)
options = parser.parse_args()
warnings.simplefilter("ignore")  # roots and logging are deprecated at 2026-07-28

mcp = MCPServer("asking-server")
roots_changed = anyio.Event()


class Person(BaseModel):
    name: str = Field(description="Your name", max_length=40)
    age: int | None = Field(default=None, description="Your age", ge=0, le=150)


@mcp.tool(structured_output=False)
async def ask_name(ctx: Context) -> str | types.InputRequiredResult:
    """Ask the user's name through a form elicitation (at 2026-07-28, as an input
    request returned in place of the result, answered when the client retries)."""
    if ctx.protocol_version == "2026-07-28":
        return _ask_name_modern(ctx)
    try:
        result = await ctx.elicit("What is your name?", Person)
    except MCPError as exc:  # the client refused the request itself
        return f"error:{exc}"
    if result.action == "accept":
        return f"accept:{result.data.name}:{result.data.age}"
    return result.action


def _ask_name_modern(ctx: Context) -> str | types.InputRequiredResult:
    answers = ctx.input_responses
    if not answers:
        schema = Person.model_json_schema()
        params = types.ElicitRequestFormParams(
            message="What is your name?", requested_schema=schema
        )
        return types.InputRequiredResult(input_requests={"who": types.ElicitRequest(params=params)})
    answer = answers.get("who")
    if not isinstance(answer, types.ElicitResult):
        return f"error:no answer: {answer!r}"
    if answer.action == "accept" and answer.content is not None:
        return f"accept:{answer.content.get('name')}:{answer.content.get('age')}"
    return answer.action


@mcp.tool(structured_output=False)
async def open_link(ctx: Context) -> str:
    """Ask the user to visit a URL (URL-mode elicitation)."""
    try:
        result = await ctx.elicit_url(
            "Sign in to the example service", "https://example.com/login", "e-1"
        )
    except MCPError as exc:
        return f"error:{exc}"
    return result.action


async def _roots(ctx: Context) -> str:
    try:
        listed = await ctx.session.list_roots()
    except MCPError as exc:
        return f"error:{exc}"
    return "\n".join(str(root.uri) for root in listed.roots)


@mcp.tool(structured_output=False)
async def roots(ctx: Context) -> str:
    """The client's roots, one URI a line."""
    return await _roots(ctx)


@mcp.tool(structured_output=False)
async def wait_roots_change(ctx: Context) -> str:
    """Wait (at most 20 s) for the client's roots to change, then list them."""
    with anyio.move_on_after(20):
        await roots_changed.wait()
    return await _roots(ctx)


@mcp.tool(structured_output=False)
async def progress(count: int, ctx: Context) -> str:
    """Report ``count`` progress steps at once."""
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"step {step}")
    return "done"


@mcp.tool(structured_output=False)
async def log(count: int, size: int, ctx: Context) -> str:
    """Send ``count`` log messages of ``size`` characters."""
    for index in range(count):
        await ctx.info(f"line {index} " + "x" * size)
    return "logged"


@mcp.tool(structured_output=False)
async def sample(text: str, ctx: Context, tools: bool = False) -> str:
    """Ask the client's model to answer ``text``."""
    offered = [types.Tool(name="lookup", input_schema={"type": "object"})] if tools else None
    try:
        result = await ctx.session.create_message(
            messages=[
                types.SamplingMessage(
                    role="user", content=types.TextContent(type="text", text=text)
                )
            ],
            max_tokens=50,
            system_prompt="Answer briefly.",
            tools=offered,
        )
    except MCPError as exc:
        return f"error:{exc}"
    content = result.content
    return content.text if isinstance(content, types.TextContent) else str(content)


async def on_roots_changed(ctx: object, params: object) -> None:
    roots_changed.set()


mcp._lowlevel_server.add_notification_handler(  # test server: hear the roots change
    "notifications/roots/list_changed", types.NotificationParams, on_roots_changed
)

if options.http is not None:
    mcp.run("streamable-http", host="127.0.0.1", port=options.http)
else:
    mcp.run()
