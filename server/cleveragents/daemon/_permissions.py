"""Asking the editor through ``permission/request`` when a run's profile says "ask".

Without the client's ``permissions`` capability no asker is given, "ask" becomes deny
and the record says why. Cancelling the run cancels a pending request
(``$/cancelRequest``). The prompt shows what the tool will really receive, the context's
reserved values included, and says when the model's own values for them were replaced.
"""

from __future__ import annotations

import logging
from typing import Any

from ..protocol import ParamsError, wire
from ..protocol import methods as m
from ..rpc import Peer, RpcError, call_peer
from ..runs import PermissionPrompt
from ..tool import PermissionQuery

logger = logging.getLogger(__name__)


def asker(peer: Peer, run_id: str) -> Any:
    """The run's ``ask``: a ``permission/request`` to the editor."""

    async def ask(query: PermissionQuery, reason: str) -> str:
        shown = PermissionPrompt.of(query, reason)
        params = wire.PermissionRequestParams(
            run_id, shown.call_id, shown.tool_name, shown.inputs, shown.reason
        )
        try:
            result: wire.PermissionRequestResult = await call_peer(
                peer, m.PERMISSION_REQUEST, params
            )
        except RpcError as exc:
            return _invalid(f"the client answered permission/request with an error: {exc}")
        except ParamsError as exc:
            return _invalid(f"the client answered permission/request with {exc}")
        return str(result.outcome)

    return ask


def _invalid(message: str) -> str:
    # Anything but a valid answer is a refusal: never run a tool on a garbled yes.
    logger.warning("%s; treating it as reject_once", message)
    return "reject_once"
