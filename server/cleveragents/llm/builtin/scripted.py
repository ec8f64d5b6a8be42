"""``scripted:PATH``: the scripted model's registration. The model itself, a public
class, is :class:`cleveragents.llm.scripted.ScriptedModel`."""

from __future__ import annotations

from cleveragents.tool import LLMCaller

from .._providers import Provider
from ..errors import ModelConfigError
from ..scripted import ScriptedModel
from ..spec import ModelSpec


def build(spec: ModelSpec) -> LLMCaller:
    """Inline turns (the object form's ``script``), else the file at ``path``."""
    if spec.script is not None:
        model = ScriptedModel(list(spec.script))
    elif spec.path is None:
        raise ModelConfigError("scripted model spec needs 'script' (a list of turns) or 'path'")
    else:
        model = ScriptedModel.from_file(spec.path)
    model.context_window = spec.context_window  # unlimited unless the spec says
    model.origin = spec.describe()
    return model


PROVIDER = Provider(
    name="scripted",
    summary="a JSON file of turns, replayed (no key, no network)",
    takes="script",
    example="turns.json",
    adapter=build,
    shared=False,
)
