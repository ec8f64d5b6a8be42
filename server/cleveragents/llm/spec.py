"""Model specs: parse ``NAME:MODEL`` (``openai:gpt-4o-mini``), ``scripted:PATH``,
``client`` and the object form, and build the matching ``LLMCaller``.

Which names exist, what follows each name's ``:``, where its key is read from and how
its caller is built all come from the provider table (``_providers``): nothing here
names a provider, and a provider registered at run time parses like a built-in one.
Provider modules are imported lazily, so importing this module (and starting the
daemon) never imports a provider SDK.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import attrs

from cleveragents.tool import LLMCaller

from ._providers import Provider, find_provider, get_provider, providers
from .errors import ModelConfigError

ModelSource: TypeAlias = str
"""Where a run's model answers come from: a registered provider's name (``openai``,
``scripted``, ``client``, ... see :func:`~cleveragents.llm.providers`)."""

MODEL_ENV_VAR = "CLEVERAGENTS_MODEL"

_OBJECT_FORM = (
    "{provider, model?, api?, baseUrl?, apiKeyEnv?, script?, path?, maxTokens?, temperature?, "
    "timeoutMs?, maxRetries?, reasoning?, cache?, contextWindow?, media?}"
)
REASONING_EFFORTS = ("minimal", "low", "medium", "high")
"""The neutral reasoning levels; each adapter maps them to its provider's own knob."""
_REASONING_KEYS = {"effort", "budgetTokens", "summary"}
_LISTED_FIRST = {"model": 0, "script": 1, "nothing": 2}


def listed_providers() -> list[Provider]:
    """The providers as messages and docs/models.md list them: those taking a model,
    then the others, each group in the table's order."""
    return sorted(providers(), key=lambda p: _LISTED_FIRST[p.takes])


def _either(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else "".join(items)


def accepted_forms() -> str:
    """The end of every malformed-spec message: each provider's form, and the object."""
    forms = _either([f"'{p.form}'" for p in listed_providers()])
    return f"a model spec is {forms}, or an object {_OBJECT_FORM}"


def config_toml() -> str:
    """The ``config.toml`` that ``cleveragents serve`` reads its model from:
    ``$XDG_CONFIG_HOME/cleveragents/config.toml``, default ``~/.config/...``."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "cleveragents", "config.toml")


def how_to_set_a_model() -> str:
    """The message of a run that has no model anywhere: every place one can be set,
    with the real path of the file a daemon started by ``cleveragents serve`` reads."""
    examples = _either([f"'{p.example_spec}'" for p in listed_providers()])
    return (
        "no model is configured: pass 'model' in run/start or in initializationOptions, "
        f"set model in {config_toml()} (which cleveragents serve reads; for example "
        f'model = "openai:gpt-4o-mini"), or set {MODEL_ENV_VAR}; for example {examples}'
    )


@attrs.frozen
class KeySource:
    """Where a key is found when no variable of it is set: :func:`set_key_source`
    installs one for the process. The command line installs its key store
    (``cleveragents keys``), for ``run`` and for ``serve``'s daemon and ACP faces; a
    library user gets none unless they install one. The environment always wins.

    ``lookup`` takes a key variable's name (``OPENAI_API_KEY``) and returns the key kept
    for it, or ``None``; it raises ``ModelConfigError`` (naming the store, never the
    key) when its store cannot be read. A key found here is handed to the SDK only: it
    never enters the environment, so no tool's command or MCP server inherits it.
    """

    lookup: Callable[[str], str | None]
    stored: str = "stored"
    """How messages name a key found here: ``OPENAI_API_KEY (stored)``."""
    hint: str = ""
    """Added to the name of a key found nowhere, in messages: ``{name}`` is the
    provider, or the spec's own ``apiKeyEnv``."""


_key_source: KeySource | None = None


def set_key_source(source: KeySource | None) -> KeySource | None:
    """Install the process's key source (``None``: the environment only); returns the
    one it replaces, so a caller can put it back."""
    global _key_source
    previous, _key_source = _key_source, source
    return previous


def _clean_key(raw: str | None) -> str:
    """CR, LF and surrounding whitespace dropped: a key pasted with its line end would
    otherwise be refused as a header value by the HTTP library, which logs the whole
    header, key included."""
    return raw.replace("\r", "").replace("\n", "").strip() if raw is not None else ""


@attrs.define(slots=True, frozen=True)
class ReasoningSettings:
    """How much the model should reason (``reasoning`` in a spec): a level, a token
    budget, and whether to stream a readable summary of it. Each adapter maps these to
    its provider's own fields (docs/models.md, "Reasoning"); a model that refuses a
    setting fails the run with the provider's message."""

    effort: str | None = None
    budget_tokens: int | None = None
    summary: bool = False


@attrs.define(slots=True, frozen=True)
class ModelSpec:
    """A parsed model spec. ``provider`` is a registered provider's name; ``script``
    holds inline scripted turns (object form)."""

    provider: ModelSource
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    script: tuple[Mapping[str, Any], ...] | None = None
    path: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    reasoning: ReasoningSettings | None = None
    """``None``: the request carries no reasoning field at all (as before they existed)."""
    context_window: int | None = None
    """The model's context window in tokens (``contextWindow``); ``None``: the
    known-models table's (``cleveragents.llm`` adapters), unlimited for the scripted
    model."""
    cache: bool = True
    """Whether the adapter marks prompt-cache breakpoints where its provider needs them
    (Anthropic); providers that cache on their own are not affected."""
    media: bool = True
    """Whether a tool's images and audio are sent to the model (``media``); ``False`` for
    a text-only model behind a provider's API, which refuses them: it reads their text
    placeholders (``[image: image/png, 1.2 KB]``) instead."""

    def api_key(self) -> str | None:
        """The API key: from the environment, else from the installed
        :class:`KeySource`; never stored in the spec itself. CR, LF and surrounding
        whitespace are dropped (``_clean_key``); a key that is empty after that is not
        set (``None``)."""
        names = self._key_envs()
        for name in names:
            key = _clean_key(os.environ.get(name))
            if key:
                return key
        source = _key_source
        if source is None:
            return None
        for name in names:
            key = _clean_key(source.lookup(name))
            if key:
                return key
        return None

    def key_env(self) -> str:
        """Where the key is read from, for messages: the first variable that is set,
        else the one a key source holds (``OPENAI_API_KEY (stored)``), else every
        variable it may be set in, and the source's hint."""
        names = self._key_envs()
        for name in names:
            if _clean_key(os.environ.get(name)):
                return name
        if not names:
            return "no key variable"
        source = _key_source
        if source is None:
            return " or ".join(names)
        for name in names:
            if _clean_key(source.lookup(name)):
                return f"{name} ({source.stored})"
        hint = source.hint.format(name=self.api_key_env or self.provider)
        return " or ".join(names) + (f" {hint}" if hint else "")

    def _key_envs(self) -> tuple[str, ...]:
        if self.api_key_env:
            return (self.api_key_env,)
        provider = find_provider(self.provider)
        return provider.key_envs if provider is not None else ()

    def describe(self) -> str:
        """A short, secret-free label for logs and transcripts."""
        provider = find_provider(self.provider)
        takes = provider.takes if provider is not None else "model"
        if takes == "script":
            return f"{self.provider}:{self.path}" if self.path else f"{self.provider}:<inline>"
        if takes == "nothing":
            return self.provider
        return f"{self.provider}:{self.model}"


_OBJECT_KEYS = {
    "provider",
    "model",
    "baseUrl",
    "apiKeyEnv",
    "script",
    "path",
    "maxTokens",
    "temperature",
    "timeoutMs",
    "maxRetries",
    "api",
    "reasoning",
    "cache",
    "contextWindow",
    "media",
}


def parse_model_spec(value: object) -> ModelSpec:
    """Parse a string or object spec; ``ModelConfigError`` naming the accepted forms."""
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, str):
        return _parse_string(value)
    if isinstance(value, Mapping):
        return _parse_object(value)
    raise ModelConfigError(f"invalid model spec {value!r}: {accepted_forms()}")


def _parse_string(text: str) -> ModelSpec:
    text = text.strip()
    name, sep, rest = text.partition(":")
    provider = find_provider(name)
    if provider is None:
        if sep:
            raise ModelConfigError(f"unknown model provider {name!r}: {accepted_forms()}")
        raise ModelConfigError(f"invalid model spec {text!r}: {accepted_forms()}")
    if provider.takes == "nothing":
        if sep:
            raise ModelConfigError(f"invalid model spec {text!r}: {accepted_forms()}")
        return ModelSpec(name)
    if not rest:
        raise ModelConfigError(f"invalid model spec {text!r}: {accepted_forms()}")
    if provider.takes == "script":
        return ModelSpec(name, path=rest)
    return ModelSpec(name, model=rest)


def _parse_object(obj: Mapping[str, Any]) -> ModelSpec:
    unknown = sorted(set(obj) - _OBJECT_KEYS)
    if unknown:
        raise ModelConfigError(f"unknown model spec field {unknown[0]!r}: {accepted_forms()}")
    name = obj.get("provider")
    provider = find_provider(name)
    if provider is None:
        raise ModelConfigError(f"unknown model provider {name!r}: {accepted_forms()}")
    api = obj.get("api")
    if api is not None:
        provider = _api_provider(provider, api)

    def opt(key: str, kind: type | tuple[type, ...]) -> Any:
        val = obj.get(key)
        if val is not None and (not isinstance(val, kind) or isinstance(val, bool)):
            raise ModelConfigError(f"model spec field {key!r} has the wrong type")
        return val

    model = opt("model", str)
    script = obj.get("script")
    if script is not None and (
        not isinstance(script, list) or not all(isinstance(t, Mapping) for t in script)
    ):
        raise ModelConfigError("model spec field 'script' must be a list of turn objects")
    if provider.takes == "model" and not model:
        raise ModelConfigError(f"model spec for {provider.name} needs 'model': {accepted_forms()}")
    path = opt("path", str)
    if provider.takes == "script" and script is None and path is None:
        raise ModelConfigError(
            f"{provider.name} model spec needs 'script' (a list of turns) or 'path'"
        )
    timeout_ms = opt("timeoutMs", (int, float))
    max_retries = opt("maxRetries", int)
    cache, media = obj.get("cache", True), obj.get("media", True)
    for name, flag in (("cache", cache), ("media", media)):
        if not isinstance(flag, bool):
            raise ModelConfigError(f"model spec field {name!r} must be true or false")
    return ModelSpec(
        provider.name,
        model=model,
        base_url=opt("baseUrl", str),
        api_key_env=opt("apiKeyEnv", str),
        script=tuple(script) if script is not None else None,
        path=path,
        max_tokens=opt("maxTokens", int),
        temperature=opt("temperature", (int, float)),
        timeout_s=timeout_ms / 1000 if timeout_ms else 60.0,
        max_retries=max_retries if max_retries is not None else 3,
        reasoning=_reasoning(obj.get("reasoning")),
        cache=cache,
        context_window=_window(obj.get("contextWindow")),
        media=media,
    )


def _window(raw: object) -> int | None:
    if raw is None:
        return None
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        raise ModelConfigError("model spec field 'contextWindow' must be a positive integer")
    return raw


def _api_provider(provider: Provider, api: object) -> Provider:
    """The registration that serves ``api`` of a provider's family (``openai`` with
    ``api: "responses"``); a provider with one API takes none."""
    apis = dict(provider.apis)
    if not isinstance(api, str) or api not in apis:
        known = ", ".join(repr(a) for a in apis)
        offer = f": its APIs are {known}" if apis else ": it has only one"
        raise ModelConfigError(f"model provider {provider.name!r} has no API {api!r}{offer}")
    return get_provider(apis[api])


def _reasoning(raw: object) -> ReasoningSettings | None:
    """``reasoning`` of an object spec; errors name the field and what it takes."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ModelConfigError(
            "model spec field 'reasoning' must be an object {effort?, budgetTokens?, summary?}"
        )
    unknown = sorted(set(raw) - _REASONING_KEYS)
    if unknown:
        raise ModelConfigError(
            f"unknown field {unknown[0]!r} in the model spec's 'reasoning': "
            "it takes effort, budgetTokens and summary"
        )
    effort = raw.get("effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise ModelConfigError(
            f"reasoning effort {effort!r} is not one of {', '.join(REASONING_EFFORTS)}"
        )
    budget = raw.get("budgetTokens")
    if budget is not None and (
        not isinstance(budget, int) or isinstance(budget, bool) or budget < 1
    ):
        raise ModelConfigError("reasoning budgetTokens must be a positive integer")
    summary = raw.get("summary", False)
    if not isinstance(summary, bool):
        raise ModelConfigError("reasoning summary must be true or false")
    return ReasoningSettings(effort, budget, summary)


def resolve_model_spec(*candidates: object) -> ModelSpec:
    """The first non-empty candidate wins, then ``CLEVERAGENTS_MODEL``; else an error."""
    for candidate in candidates:
        if candidate is not None and candidate != "":
            return parse_model_spec(candidate)
    env = os.environ.get(MODEL_ENV_VAR)
    if env:
        return parse_model_spec(env)
    raise ModelConfigError(how_to_set_a_model())


def create_caller(spec: ModelSpec) -> LLMCaller:
    """Build the caller for a spec with its provider's adapter. A provider without one
    (``client``: the daemon asks the editor through ``llm/generate``) is refused."""
    provider = get_provider(spec.provider)
    if provider.adapter is None:
        raise ModelConfigError(f"the {provider.name!r} model is not built here: {provider.summary}")
    return provider.adapter(spec)
