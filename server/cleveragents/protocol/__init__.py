"""Protocol v1 of the cleveragents daemon: wire types, the method table, the converter,
and the LSP base framing.

No pygls and no transport of its own (the framing helpers work on any asyncio stream).
The daemon and both clients use these names and types. ``client-protocol/schema/``, the
field tables of ``client-protocol/PROTOCOL.md`` (``_schema``, ``_doc``) and the TypeScript
types (``_typescript``) are generated from them by ``python -m cleveragents._codegen``,
which hands in the error classes of every layer.
"""

from . import _methods as methods
from . import _types as wire
from ._converter import ParamsError, RawJson, camel, converter, dumps, structure, unstructure
from ._errors import RpcError
from ._events import EventEncoder, result_wire, usage_wire, wire_notification
from ._framing import MAX_BODY, FrameReader, encode_frame, fits, frame, read_body
from ._methods import BY_NAME, METHODS, PROTOCOL_VERSION, RUN_EVENTS, Method

__all__ = [
    "BY_NAME",
    "MAX_BODY",
    "METHODS",
    "PROTOCOL_VERSION",
    "RUN_EVENTS",
    "EventEncoder",
    "FrameReader",
    "Method",
    "ParamsError",
    "RawJson",
    "RpcError",
    "camel",
    "converter",
    "dumps",
    "encode_frame",
    "fits",
    "frame",
    "methods",
    "read_body",
    "result_wire",
    "structure",
    "unstructure",
    "usage_wire",
    "wire",
    "wire_notification",
]
