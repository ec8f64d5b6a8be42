"""The JSON-RPC faces' own error (a request before the handshake), and the one
exception-to-wire boundary both faces answer through."""

from __future__ import annotations

import logging

from ..protocol import ParamsError, RpcError, camel
from ..runs import RunRequestError
from ..tool import CleverAgentsError, JsonRpcCode

logger = logging.getLogger(__name__)


class NotInitializedError(CleverAgentsError):
    """A request before ``initialize``."""

    code = -32026


def to_rpc_error(exc: BaseException) -> RpcError:
    """The one exception-to-wire mapping of every face's handlers: our errors keep their
    code and message, a bad field is invalid params naming it as the wire does, anything
    else is logged and answered as an internal error, without its text."""
    if isinstance(exc, RpcError):
        return exc
    if isinstance(exc, RunRequestError):
        return RpcError(exc.code, f"params.{camel(exc.field)}: {exc.problem}")
    if isinstance(exc, ParamsError):
        return RpcError(JsonRpcCode.INVALID_PARAMS, str(exc))
    if isinstance(exc, CleverAgentsError):
        return RpcError(exc.code, exc.message)
    logger.error("internal error", exc_info=exc)
    return RpcError(JsonRpcCode.INTERNAL_ERROR, "internal error (the daemon logged it on stderr)")
