"""The context windows of the models we know, by name prefix, and the provider each
name belongs to.

A spec's ``contextWindow`` wins over the table; a model the table does not know gets
``DEFAULT_WINDOW``, and the log says so once per model. The table is data, not a closed
list: :func:`register_model` adds a family at run time (a provider registered at run
time may bring its own).
"""

from __future__ import annotations

import logging
import threading

import attrs

__all__ = ["DEFAULT_WINDOW", "KnownModel", "find_model", "known_models", "register_model"]

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 128_000
"""The window assumed for a model the table does not know: the smallest of today's
common families, so the budget compacts early rather than overflows."""


@attrs.frozen
class KnownModel:
    """A model family: names starting with ``prefix`` belong to ``provider`` and have a
    context window of ``window`` tokens (input and output together)."""

    prefix: str
    provider: str
    window: int


_BUILTIN = (
    # OpenAI
    KnownModel("gpt-5", "openai", 400_000),
    KnownModel("gpt-4.1", "openai", 1_047_576),
    KnownModel("gpt-4o", "openai", 128_000),
    KnownModel("gpt-4-turbo", "openai", 128_000),
    KnownModel("gpt-4", "openai", 8_192),
    KnownModel("gpt-3.5-turbo", "openai", 16_385),
    KnownModel("o1", "openai", 200_000),
    KnownModel("o3", "openai", 200_000),
    KnownModel("o4-mini", "openai", 200_000),
    # Anthropic
    KnownModel("claude-opus-4", "anthropic", 200_000),
    KnownModel("claude-sonnet-4", "anthropic", 200_000),
    KnownModel("claude-haiku-4", "anthropic", 200_000),
    KnownModel("claude-3", "anthropic", 200_000),
    # Gemini
    KnownModel("gemini-3", "gemini", 1_048_576),
    KnownModel("gemini-2.5", "gemini", 1_048_576),
    KnownModel("gemini-2.0", "gemini", 1_048_576),
    KnownModel("gemini-1.5-pro", "gemini", 2_097_152),
    KnownModel("gemini-1.5-flash", "gemini", 1_048_576),
)

_table: list[KnownModel] = list(_BUILTIN)
_lock = threading.Lock()
_warned: set[str] = set()


def register_model(model: KnownModel) -> None:
    """Add (or, for a prefix known already, replace) a model family."""
    if not isinstance(model, KnownModel):
        raise TypeError(f"register_model takes a KnownModel, not {type(model).__name__}")
    if not model.prefix or model.window < 1:
        raise ValueError("a known model needs a prefix and a positive window")
    with _lock:
        _table[:] = [m for m in _table if m.prefix != model.prefix]
        _table.append(model)


def known_models() -> tuple[KnownModel, ...]:
    """Every known family, longest prefix first within a provider."""
    with _lock:
        return tuple(sorted(_table, key=lambda m: (m.provider, -len(m.prefix), m.prefix)))


def find_model(name: str) -> KnownModel | None:
    """The family a model name belongs to (the longest prefix that matches), or None."""
    found: KnownModel | None = None
    with _lock:
        for model in _table:
            if name.startswith(model.prefix) and (
                found is None or len(model.prefix) > len(found.prefix)
            ):
                found = model
    return found


def window_of(name: str, label: str) -> int:
    """The context window of model ``name`` (``label`` names it in the log line)."""
    found = find_model(name)
    if found is not None:
        return found.window
    if label not in _warned:
        _warned.add(label)
        log.info(
            "%s: context window unknown, assuming %d tokens (set contextWindow in the model "
            "spec to say)", label, DEFAULT_WINDOW,
        )  # fmt: skip
    return DEFAULT_WINDOW
