"""Asking the editor through ``permission/request`` when a run's profile says "ask".

Without the client's ``permissions`` capability no asker is given, "ask" becomes deny
and the record says why. Cancelling the run cancels a pending request
(``$/cancelRequest``). The prompt shows what the tool will really receive, the context's
reserved values included, and says when the model's own values for them were replaced.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..protocol import methods as m
from ..protocol import unstructure, wire
from ..rpc import Peer, RpcError
from ..tool import PERMISSION_OUTCOMES, PermissionQuery

logger = logging.getLogger(__name__)


def asker(peer: Peer, run_id: str) -> Any:
    """The run's ``ask``: a ``permission/request`` to the editor."""

    async def ask(query: PermissionQuery, reason: str) -> str:
        overridden = query.overridden
        if overridden:
            reason += (
                f"; the model's own {' and '.join(overridden)} "
                f"{'was' if len(overridden) == 1 else 'were'} replaced by the run's"
            )
        inputs = query.inputs if query.inputs is not None else query.arguments
        name = query.spec.name
        params = wire.PermissionRequestParams(run_id, query.call_id, name, inputs, reason)
        msg_id, future = peer.request(m.PERMISSION_REQUEST, unstructure(params))
        try:
            reply = await future
        except asyncio.CancelledError:
            peer.cancel_request(msg_id)
            raise
        except RpcError as exc:
            return _invalid(f"the client answered permission/request with an error: {exc}")
        outcome = reply.get("outcome") if isinstance(reply, dict) else None
        if outcome not in PERMISSION_OUTCOMES:
            return _invalid(f"the client answered permission/request with outcome {outcome!r}")
        return str(outcome)

    return ask


def _invalid(message: str) -> str:
    # Anything but a valid answer is a refusal: never run a tool on a garbled yes.
    logger.warning("%s; treating it as reject_once", message)
    return "reject_once"
