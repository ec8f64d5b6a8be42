"""One JSON-RPC message as bytes: parsed strictly, or refused with a code and a plain
message.

Strict means: UTF-8 only, no ``NaN``/``Infinity`` literals, nesting at most
:data:`MAX_DEPTH` levels, and lone surrogate escapes found (the dispatcher answers those
with the message's own id when it can). Nothing here knows a method or the lifecycle.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

from ..protocol import RpcError, dumps
from ..tool import JsonRpcCode

MAX_DEPTH = 512
"""Deepest nesting of arrays and objects accepted in one message."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decode = json.JSONDecoder(parse_constant=_reject_constant).decode
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests deeper than ``MAX_DEPTH`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def has_lone_surrogate(value: Any) -> bool:
    try:
        dumps(value).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse(body: bytes) -> tuple[Any, bool]:
    """One message's JSON value, and whether it holds a lone surrogate escape (the
    caller answers that with the message's own id when it can); ``RpcError(-32700)``
    naming what is wrong otherwise."""
    too_deep = f"parse error: nested deeper than {MAX_DEPTH} levels"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RpcError(
            JsonRpcCode.PARSE_ERROR, f"parse error: invalid UTF-8 at byte {exc.start}"
        ) from None
    try:
        data = _decode(text)
    except RecursionError:
        raise RpcError(JsonRpcCode.PARSE_ERROR, too_deep) from None
    except ValueError as exc:
        raise RpcError(JsonRpcCode.PARSE_ERROR, f"parse error: {exc}") from None
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _too_deep(data):
        raise RpcError(JsonRpcCode.PARSE_ERROR, too_deep)
    return data, bool(_SURROGATE_ESCAPE.search(body)) and has_lone_surrogate(data)


def valid_id(value: Any) -> TypeGuard[str | int]:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def table_key(msg_id: str | int) -> tuple[bool, str | int]:
    """Table key of a client request id: 1 and "1" differ, and so do 1, True and 1.0."""
    return isinstance(msg_id, str), msg_id
