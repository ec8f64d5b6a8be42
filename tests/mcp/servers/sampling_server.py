"""A real MCP server (the SDK's ``MCPServer``) whose one tool asks its client's model
for a message with every setting of ``sampling/createMessage``, as a server may.

Run as ``python sampling_server.py``. Tool:

- ``sample``: asks the client's model (``create_message``) to answer ``text``, with
  ``max_tokens``, and when given ``temperature``, ``stop`` (``stopSequences``),
  ``system`` (``systemPrompt``), ``hint`` (a ``modelPreferences`` hint naming a model)
  and ``include_context``; ``times`` asks that many times in a row. Answers the last
  result as JSON ``{"text", "model", "stopReason"}``, or ``error:...`` when the client
  refused.
"""

from __future__ import annotations

import json
import warnings
from typing import Literal

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

warnings.simplefilter("ignore")

mcp = MCPServer("sampling-server")


@mcp.tool(structured_output=False)
async def sample(
    text: str,
    ctx: Context,
    max_tokens: int = 50,
    temperature: float | None = None,
    stop: list[str] | None = None,
    system: str | None = None,
    hint: str | None = None,
    include_context: Literal["none", "thisServer", "allServers"] | None = None,
    times: int = 1,
) -> str:
    """Ask the client's model to answer ``text`` with the given settings."""
    preferences = (
        types.ModelPreferences(
            hints=[types.ModelHint(name=hint)], cost_priority=0.9, intelligence_priority=0.1
        )
        if hint is not None
        else None
    )
    result = None
    for _ in range(times):
        try:
            result = await ctx.session.create_message(
                messages=[
                    types.SamplingMessage(
                        role="user", content=types.TextContent(type="text", text=text)
                    )
                ],
                max_tokens=max_tokens,
                system_prompt=system,
                temperature=temperature,
                stop_sequences=stop,
                model_preferences=preferences,
                include_context=include_context,
            )
        except MCPError as exc:
            return f"error:{exc}"
    assert result is not None
    content = result.content
    answer = content.text if isinstance(content, types.TextContent) else str(content)
    return json.dumps({"text": answer, "model": result.model, "stopReason": result.stop_reason})


mcp.run()
