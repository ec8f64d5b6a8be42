"""Wire types of what an MCP server asks of the user through the daemon's client:
``mcp/elicit`` (a server's ``elicitation/create``)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ._optional import opt

ElicitMode = Literal["form", "url"]
ElicitAction = Literal["accept", "decline", "cancel"]


@attrs.define
class McpElicitParams:
    """An MCP server asks the user for something, in the middle of a tool call (or
    outside any run). Sent only to a client that declared
    ``capabilities.experimental.cleveragents.elicitation``; every other client's
    elicitations are declined for it."""

    server: str
    """The MCP server that asks (the entry's name): show it, the request is its words."""
    mode: ElicitMode
    """``form``: fill in ``requestedSchema``; ``url``: open ``url`` (the interaction
    happens there, outside the client and the daemon)."""
    message: str
    """The server's question (at most 4,000 characters). Untrusted text."""
    run_id: str | None = opt()
    """The run whose tool call the server was serving when it asked."""
    requested_schema: dict[str, Any] | None = opt()
    """Form mode: a flat object schema of strings, numbers, integers, booleans and enums
    (MCP's restricted subset), as the server sent it."""
    url: str | None = opt()
    """URL mode: an ``http`` or ``https`` URL. Show its host before the user opens it."""
    elicitation_id: str | None = opt()
    """URL mode: the server's id of this elicitation."""


@attrs.define
class McpElicitResult:
    action: ElicitAction
    """``accept``: the user answered (form) or agreed to open the URL; ``decline``: the
    user said no; ``cancel``: the user dismissed the question."""
    content: dict[str, Any] | None = opt()
    """Form mode, ``accept`` only: the values, which must match ``requestedSchema``
    (otherwise the server is told the elicitation failed). Absent in URL mode."""
