"""What the SDK-backed adapters share: spec checks, the lazy SDK import, the key rule,
the router, the retry policy, cancellation, the SDK clients' lifetime (``_clients``), and
keeping the key and the ``baseUrl``'s credentials out of errors and logs (``_redact``).
Each adapter adds its request body, its client, and how its SDK streams and fails;
nothing here knows a provider: the SDK to import, its extra, the codec to speak and the
key variables come from the spec's provider registration (``_providers``), so one
adapter class can serve several providers that speak its API.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

import attrs

from cleveragents.tool import LLMRequest, LLMResponse, ToolCallRouter, ToolSchema

from ._clients import ClientPool
from ._providers import Provider, get_provider
from ._redact import guard_logs, remember, url_secrets
from ._retry import (
    Failure,
    RetryPolicy,
    Sleep,
    classify_sdk_error,
    run_cancellable,
    stream_with_retries,
)
from ._windows import window_of
from .errors import ModelConfigError
from .spec import ModelSpec

NO_KEY = "no-key"
"""Sent to keyless local servers (Ollama, llama.cpp), which ignore it."""


class SdkCaller(ABC):
    """An async ``LLMCaller`` over an official SDK, built from a ``ModelSpec`` of a
    provider whose registration names the SDK (``package``) and the codec.

    One instance serves every call of every run that uses its spec, over one SDK client
    (one connection pool) per event loop; :meth:`aclose` closes them.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

    provider: Provider
    base_url: str | None
    """The spec's ``baseUrl``, else the provider's, else ``None`` (the SDK's default)."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        max_retry_after_s: float = 60.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        provider = self.provider = get_provider(spec.provider)
        name = provider.name
        if provider.package is None or provider.codec is None:
            raise ModelConfigError(f"the {name} provider names no SDK package or codec")
        if not spec.model:
            raise ModelConfigError(
                f"the {name} model spec needs a model, e.g. '{provider.example_spec}'"
            )
        try:
            self._sdk: Any = importlib.import_module(provider.package)
        except ImportError:
            how = f": pip install 'cleveragents[{provider.extra}]'" if provider.extra else ""
            raise ModelConfigError(
                f"the {name} provider needs the '{provider.package}' package{how}"
            ) from None
        self.spec = spec
        self.base_url = spec.base_url or provider.base_url
        if not spec.api_key() and not spec.base_url:
            raise ModelConfigError(
                f"no API key for {spec.describe()}: set {spec.key_env()}, "
                "or give a baseUrl for a server that needs none"
            )
        guard_logs()  # the SDK, and the HTTP stack under it, are imported by now
        self._router = ToolCallRouter(provider.codec, origin=spec.describe())
        self._policy = RetryPolicy(spec.max_retries, base_delay_s, max_delay_s, max_retry_after_s)
        self._sleep = sleep
        self._clients = ClientPool(self._new_client, self._close_client)
        self._tools_for: tuple[Sequence[ToolSchema], list[Any]] | None = None

    @property
    def context_window(self) -> int:
        """The model's context window in tokens: the spec's ``contextWindow``, else the
        known-models table's, else its default (see ``_windows``)."""
        spec = self.spec
        if spec.context_window is not None:
            return spec.context_window
        return window_of(spec.model or "", spec.describe())

    @property
    def max_output_tokens(self) -> int | None:
        """The room a request keeps for the answer (the spec's ``maxTokens``)."""
        return self.spec.max_tokens

    def answer_cap(self, request: LLMRequest) -> int | None:
        """The answer's token cap for this call: the spec's ``maxTokens`` and the call's
        own (``LLMRequest.settings``), the smaller when both are set (the user's cap
        stands); ``None``: the provider's default."""
        own = self.spec.max_tokens
        settings = request.settings
        asked = settings.max_tokens if settings is not None else None
        if asked is None:
            return own
        return asked if own is None else min(own, asked)

    def temperature(self, request: LLMRequest) -> float | None:
        """The call's own temperature, else the spec's (``None``: the provider's)."""
        settings = request.settings
        if settings is not None and settings.temperature is not None:
            return settings.temperature
        return self.spec.temperature

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.spec.describe()!r})"

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        return await run_cancellable(self._call(request), request.cancel)

    async def aclose(self) -> None:
        """Close the SDK clients and their connections; a later call opens new ones."""
        await self._clients.aclose()

    def provider_tools(self, request: LLMRequest) -> list[Any]:
        """The request's tools in this provider's format, built once per tool set: the
        runtime hands every iteration the registry's same schemas tuple until it changes,
        so a run pays the mapping (and Gemini's schema cleaning) once, not per call."""
        cached = self._tools_for
        if cached is not None and cached[0] is request.tools:
            return cached[1]
        tools = self._router.tools(request.tools)
        self._tools_for = (request.tools, tools)
        return tools

    @abstractmethod
    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The request's keyword arguments for one call (never the key)."""

    @abstractmethod
    def _new_client(self, key: str) -> Any:
        """A new async SDK client with its own connection pool."""

    @abstractmethod
    async def _close_client(self, client: Any) -> None:
        """Close a client made by :meth:`_new_client`."""

    @abstractmethod
    def _open_stream(self, client: Any, body: dict[str, Any]) -> Awaitable[Any]:
        """Start the streamed request: an awaitable of an async context manager that
        iterates the SDK's items."""

    def _chunk(self, item: Any) -> Mapping[str, Any]:
        """One SDK stream item as the router's chunk dict."""
        return item.model_dump(mode="json")  # type: ignore[no-any-return]

    def _classify(self, exc: BaseException, secrets: Sequence[str]) -> Failure | None:
        """Map one failed attempt's exception; ``None`` when it is not the provider's."""
        return classify_sdk_error(
            exc,
            self._sdk,
            timeout_s=self.spec.timeout_s,
            key_env=self.spec.key_env(),
            model=self.spec.model,
            secrets=secrets,
        )

    async def _call(self, request: LLMRequest) -> LLMResponse:
        if not self.spec.media:
            request = without_media(request)
        body = self.body(request)
        key = self.spec.api_key()
        # Read per call, since the environment may change between runs of one caller.
        secrets = (*((key,) if key else ()), *url_secrets(self.base_url))
        remember(secrets)
        client = await self._clients.get(key or NO_KEY)
        return await stream_with_retries(
            lambda: self._open_stream(client, body),
            start=lambda: self._router.stream(iteration=request.iteration),
            on_delta=request.on_delta,
            on_reasoning=request.on_reasoning,
            policy=self._policy,
            classify=functools.partial(self._classify, secrets=secrets),
            label=self.spec.describe(),
            sleep=self._sleep,
            as_chunk=self._chunk,
        )


def without_media(request: LLMRequest) -> LLMRequest:
    """``request`` with no images or audio on its messages (a ``media: false`` model's):
    their text placeholders stay, so the model still learns what a tool returned."""
    if not any(message.media for message in request.messages):
        return request
    messages = [
        attrs.evolve(message, media=[]) if message.media else message
        for message in request.messages
    ]
    return attrs.evolve(request, messages=messages)
