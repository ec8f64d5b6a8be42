"""An MCP server's elicitation, asked of the editor through ``mcp/elicit``.

Only a client that declared ``capabilities.experimental.cleveragents.elicitation`` is
asked; for any other the run service declines. An error reply, a malformed one or a
dropped connection is a ``cancel``: the server is never given an answer the user did not
give. The answer's content is checked against the server's schema by ``cleveragents.mcp``
before it goes back.
"""

from __future__ import annotations

import logging

from ..mcp import Elicitation, ElicitationAnswer
from ..protocol import ParamsError, wire
from ..protocol import methods as m
from ..rpc import Peer, RpcError, call_peer
from ..runs import Elicit

logger = logging.getLogger(__name__)


def elicitor(peer: Peer) -> Elicit:
    """The service's ``elicit``: an ``mcp/elicit`` request to the editor."""

    async def elicit(run_id: str | None, request: Elicitation) -> ElicitationAnswer:
        params = wire.McpElicitParams(
            request.server, request.mode, request.message, run_id,
            request.requested_schema, request.url, request.elicitation_id,
        )  # fmt: skip
        try:
            result: wire.McpElicitResult = await call_peer(peer, m.MCP_ELICIT, params)
        except (RpcError, ParamsError) as exc:
            logger.warning("the client answered mcp/elicit badly (%s); cancelling it", exc)
            return ElicitationAnswer("cancel")
        return ElicitationAnswer(result.action, result.content)

    return elicit
