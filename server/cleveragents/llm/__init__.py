"""The models a run can use: model specs (:mod:`.spec`), their errors (:mod:`.errors`),
the open table of providers (``Provider``, ``register_provider``), the scripted model
(:mod:`.scripted`), and the built-in providers (:mod:`.builtin`: OpenAI, Anthropic and
Gemini, with their adapters over the official SDKs; the scripted model; the editor's).

Stands on ``cleveragents.tool``'s public names only. Importing this package, or any of
its modules, imports no provider SDK: an adapter imports its SDK when it is built. The
names most callers need (specs, errors, the provider table, the scripted model) are
re-exported here.

A provider added at run time, without editing this package::

    register_codec("theirs", TheirCodec())          # cleveragents.tool; only for a new
                                                    # wire format
    register_provider(Provider(name="theirs", summary="...", key_envs=("THEIRS_KEY",),
                               codec="theirs", adapter=TheirCaller))

after which ``{"provider": "theirs", "model": "m"}`` and ``theirs:m`` are model specs.
"""

from __future__ import annotations

import typing

from ..tool._lazy import lazy_exports as _lazy_exports
from ._providers import Provider, get_provider, providers, register_provider
from ._redact import log_scrubber
from .errors import ContextOverflowError, ModelConfigError, ModelProviderError
from .spec import (
    ModelSource,
    ModelSpec,
    ReasoningSettings,
    create_caller,
    parse_model_spec,
    resolve_model_spec,
)

if typing.TYPE_CHECKING:
    from ._windows import DEFAULT_WINDOW, KnownModel, find_model, known_models, register_model
    from .scripted import ScriptedModel

_LAZY = {
    "DEFAULT_WINDOW": "_windows",
    "KnownModel": "_windows",
    "find_model": "_windows",
    "known_models": "_windows",
    "register_model": "_windows",
    "ScriptedModel": "scripted",
}
"""The known-models table and the scripted model load when first named: a daemon reads
its model spec before its ``initialize`` reply, and builds the model only for a run."""


__getattr__ = _lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "DEFAULT_WINDOW",
    "ContextOverflowError",
    "KnownModel",
    "ModelConfigError",
    "ModelProviderError",
    "ModelSource",
    "ModelSpec",
    "Provider",
    "ReasoningSettings",
    "ScriptedModel",
    "create_caller",
    "find_model",
    "get_provider",
    "known_models",
    "log_scrubber",
    "parse_model_spec",
    "providers",
    "register_model",
    "register_provider",
    "resolve_model_spec",
]
