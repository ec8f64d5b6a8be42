"""Model specs: parse ``scripted:PATH``, ``openai:MODEL``, ``anthropic:MODEL``,
``gemini:MODEL``, ``client`` and the object form, and build the matching ``LLMCaller``.

Provider modules are imported lazily here, so importing this module (and starting the
daemon) never imports a provider SDK.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, get_args

import attrs

from cleveragents.tool import LLMCaller

from .errors import ModelConfigError

ModelSource = Literal["scripted", "openai", "anthropic", "gemini", "client"]
"""Where a run's model answers come from: a script, an HTTP provider, or the client."""
MODEL_SOURCES: tuple[ModelSource, ...] = get_args(ModelSource)
HTTP_PROVIDERS: tuple[ModelSource, ...] = ("openai", "anthropic", "gemini")

KEY_ENVS: dict[ModelSource, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    # As the google-genai SDK reads them: GOOGLE_API_KEY wins when both are set.
    "gemini": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
}
"""The variables an HTTP provider's key is read from when the spec names none."""

MODEL_ENV_VAR = "CLEVERAGENTS_MODEL"

ACCEPTED_FORMS = (
    "a model spec is 'scripted:PATH', 'openai:MODEL', 'anthropic:MODEL', 'gemini:MODEL' "
    "or 'client', "
    "or an object {provider, model?, baseUrl?, apiKeyEnv?, script?, maxTokens?, temperature?}"
)

HOW_TO_SET_A_MODEL = (
    "no model is configured: pass 'model' in run/start or in initializationOptions, "
    f"or set {MODEL_ENV_VAR}; for example 'scripted:turns.json', 'openai:gpt-4o-mini', "
    "'anthropic:claude-sonnet-4-5', 'gemini:gemini-2.5-flash' or 'client'"
)


@attrs.define(slots=True, frozen=True)
class ModelSpec:
    """A parsed model spec. ``script`` holds inline scripted turns (object form)."""

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

    def api_key(self) -> str | None:
        """The API key from the environment; never stored in the spec itself.

        CR, LF and surrounding whitespace are dropped: a key pasted with its line end
        would otherwise be refused as a header value by the HTTP library, which logs the
        whole header, key included. A key that is empty after that is not set (``None``).
        """
        for name in self._key_envs():
            raw = os.environ.get(name)
            key = raw.replace("\r", "").replace("\n", "").strip() if raw is not None else ""
            if key:
                return key
        return None

    def key_env(self) -> str:
        """The variable the key is read from (the first that is set), for messages."""
        names = self._key_envs()
        for name in names:
            if (os.environ.get(name) or "").strip():
                return name
        return " or ".join(names) if names else "no key variable"

    def _key_envs(self) -> tuple[str, ...]:
        return (self.api_key_env,) if self.api_key_env else KEY_ENVS.get(self.provider, ())

    def describe(self) -> str:
        """A short, secret-free label for logs and transcripts."""
        if self.provider == "scripted":
            return f"scripted:{self.path}" if self.path else "scripted:<inline>"
        if self.provider == "client":
            return "client"
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
}


def parse_model_spec(value: object) -> ModelSpec:
    """Parse a string or object spec; ``ModelConfigError`` naming the accepted forms."""
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, str):
        return _parse_string(value)
    if isinstance(value, Mapping):
        return _parse_object(value)
    raise ModelConfigError(f"invalid model spec {value!r}: {ACCEPTED_FORMS}")


def _parse_string(text: str) -> ModelSpec:
    text = text.strip()
    if text == "client":
        return ModelSpec("client")
    provider, sep, rest = text.partition(":")
    if not sep or not rest:
        raise ModelConfigError(f"invalid model spec {text!r}: {ACCEPTED_FORMS}")
    if provider == "scripted":
        return ModelSpec("scripted", path=rest)
    if provider in HTTP_PROVIDERS:
        return ModelSpec(provider, model=rest)
    raise ModelConfigError(f"unknown model provider {provider!r}: {ACCEPTED_FORMS}")


def _parse_object(obj: Mapping[str, Any]) -> ModelSpec:
    unknown = sorted(set(obj) - _OBJECT_KEYS)
    if unknown:
        raise ModelConfigError(f"unknown model spec field {unknown[0]!r}: {ACCEPTED_FORMS}")
    provider = obj.get("provider")
    if provider not in MODEL_SOURCES:
        raise ModelConfigError(f"unknown model provider {provider!r}: {ACCEPTED_FORMS}")

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
    if provider in HTTP_PROVIDERS and not model:
        raise ModelConfigError(f"model spec for {provider} needs 'model': {ACCEPTED_FORMS}")
    path = opt("path", str)
    if provider == "scripted" and script is None and path is None:
        raise ModelConfigError("scripted model spec needs 'script' (a list of turns) or 'path'")
    timeout_ms = opt("timeoutMs", (int, float))
    max_retries = opt("maxRetries", int)
    return ModelSpec(
        provider,
        model=model,
        base_url=opt("baseUrl", str),
        api_key_env=opt("apiKeyEnv", str),
        script=tuple(script) if script is not None else None,
        path=path,
        max_tokens=opt("maxTokens", int),
        temperature=opt("temperature", (int, float)),
        timeout_s=timeout_ms / 1000 if timeout_ms else 60.0,
        max_retries=max_retries if max_retries is not None else 3,
    )


def resolve_model_spec(*candidates: object) -> ModelSpec:
    """The first non-empty candidate wins, then ``CLEVERAGENTS_MODEL``; else an error."""
    for candidate in candidates:
        if candidate is not None and candidate != "":
            return parse_model_spec(candidate)
    env = os.environ.get(MODEL_ENV_VAR)
    if env:
        return parse_model_spec(env)
    raise ModelConfigError(HOW_TO_SET_A_MODEL)


def create_caller(spec: ModelSpec) -> LLMCaller:
    """Build the caller for a spec. ``client`` models are built by the daemon, not here."""
    if spec.provider == "scripted":
        from .scripted import ScriptedModel

        if spec.script is not None:
            return ScriptedModel(list(spec.script))
        assert spec.path is not None
        return ScriptedModel.from_file(spec.path)
    if spec.provider == "openai":
        from .openai import OpenAIChatCaller

        return OpenAIChatCaller(spec)
    if spec.provider == "anthropic":
        from .anthropic import AnthropicCaller

        return AnthropicCaller(spec)
    if spec.provider == "gemini":
        from .gemini import GeminiCaller

        return GeminiCaller(spec)
    raise ModelConfigError("the 'client' model is served by the daemon (llm/generate)")
