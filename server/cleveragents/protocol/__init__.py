"""Protocol v1 of the cleveragents daemon: wire types, the method table, the converter.

Everything here is data: no I/O, no pygls. The daemon and both clients use these names
and types; ``client-protocol/schema/`` is generated from them.
"""

from . import _methods as methods
from . import _types as wire
from ._converter import ParamsError, camel, converter, dumps, structure, unstructure
from ._methods import BY_NAME, METHODS, PROTOCOL_VERSION, Method

__all__ = [
    "BY_NAME",
    "METHODS",
    "PROTOCOL_VERSION",
    "Method",
    "ParamsError",
    "camel",
    "converter",
    "dumps",
    "methods",
    "structure",
    "unstructure",
    "wire",
]
