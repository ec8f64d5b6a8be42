"""``client``: the editor's own model, lent through ``llm/generate``.

Registered so that specs name it like any provider, and so that messages and the docs
list it; it has no adapter, because no caller is built for it here: the daemon answers
each of the run's model calls by asking the client that started the run (which must
have declared the capability), and :func:`~cleveragents.llm.create_caller` refuses it.
"""

from __future__ import annotations

from .._providers import Provider

PROVIDER = Provider(
    name="client",
    summary="the editor lends its own model through `llm/generate`",
    takes="nothing",
)
