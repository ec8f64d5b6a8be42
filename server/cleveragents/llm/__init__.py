"""The models a run can use: model specs (:mod:`.spec`), their errors (:mod:`.errors`),
the scripted model (:mod:`.scripted`) and the HTTP adapters over the official SDKs
(:mod:`.openai`, :mod:`.anthropic`, :mod:`.gemini`).

Stands on ``cleveragents.tool``'s public names only. Importing this package, or any of
its modules, imports no provider SDK: an adapter imports its SDK when it is built. The
names most callers need (specs, errors, the scripted model) are re-exported here.
"""

from .errors import ModelConfigError, ModelProviderError
from .scripted import ScriptedModel
from .spec import ModelSource, ModelSpec, create_caller, parse_model_spec, resolve_model_spec

__all__ = [
    "ModelConfigError",
    "ModelProviderError",
    "ModelSource",
    "ModelSpec",
    "ScriptedModel",
    "create_caller",
    "parse_model_spec",
    "resolve_model_spec",
]
