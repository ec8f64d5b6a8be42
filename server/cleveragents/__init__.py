"""cleveragents: a tool-calling runtime for LLM actors.

The library lives in :mod:`cleveragents.tool`; the daemon in :mod:`cleveragents.daemon`.
"""

__version__ = "0.1.0"
