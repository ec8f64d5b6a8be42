"""What the SDK-backed adapters share: spec checks, the lazy SDK import, the key rule,
the router, the retry policy, cancellation, and keeping the key and the ``baseUrl``'s
credentials out of errors and logs (through ``_redact``). Each adapter adds its request
body and its streaming; nothing here knows a provider's wire format.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from ..tool._errors import ModelConfigError
from ..tool._router import Provider, ToolCallRouter
from ..tool._types import LLMRequest, LLMResponse
from ._redact import guard_logs, remember, url_secrets
from ._retry import (
    RetryPolicy,
    Sleep,
    classify_sdk_error,
    run_cancellable,
    stream_with_retries,
)
from .spec import ModelSpec

NO_KEY = "no-key"
"""Sent to keyless local servers (Ollama, llama.cpp), which ignore it."""


class SdkCaller(ABC):
    """An async ``LLMCaller`` over an official SDK, built from a ``ModelSpec``.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

    provider: ClassVar[Provider]
    package: ClassVar[str]
    example_spec: ClassVar[str]
    default_key_env: ClassVar[str]

    def __init__(
        self,
        spec: ModelSpec,
        *,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        max_retry_after_s: float = 60.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        name = self.provider
        if not spec.model:
            raise ModelConfigError(
                f"the {name} model spec needs a model, e.g. '{self.example_spec}'"
            )
        try:
            self._sdk: Any = importlib.import_module(self.package)
        except ImportError:
            raise ModelConfigError(
                f"the {name} provider needs the '{self.package}' package: "
                f"pip install 'cleveragents[{self.package}]'"
            ) from None
        self.spec = spec
        self._key_env = spec.api_key_env or self.default_key_env
        if not spec.api_key() and not spec.base_url:
            raise ModelConfigError(
                f"no API key for {spec.describe()}: set {self._key_env}, "
                "or give a baseUrl for a server that needs none"
            )
        guard_logs()  # the SDK, and the HTTP stack under it, are imported by now
        self._router = ToolCallRouter(name)
        self._policy = RetryPolicy(spec.max_retries, base_delay_s, max_delay_s, max_retry_after_s)
        self._sleep = sleep

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.spec.describe()!r})"

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        return await run_cancellable(self._call(request), request.cancel)

    @abstractmethod
    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The request's keyword arguments for one call (never the key)."""

    @abstractmethod
    def _client(self, key: str) -> Any:
        """A new async SDK client (an async context manager)."""

    @abstractmethod
    def _create(self, client: Any, body: dict[str, Any]) -> Any:
        """Start the streamed request (an awaitable of the SDK's stream)."""

    async def _call(self, request: LLMRequest) -> LLMResponse:
        body = self.body(request)
        key = self.spec.api_key()
        # Read per call, since the environment may change between runs of one caller.
        secrets = (*((key,) if key else ()), *url_secrets(self.spec.base_url))
        remember(secrets)
        classify = functools.partial(
            classify_sdk_error,
            sdk=self._sdk,
            timeout_s=self.spec.timeout_s,
            key_env=self._key_env,
            model=self.spec.model,
            secrets=secrets,
        )
        async with self._client(key or NO_KEY) as client:
            return await stream_with_retries(
                lambda: self._create(client, body),
                start=lambda: self._router.stream(iteration=request.iteration),
                on_delta=request.on_delta,
                policy=self._policy,
                classify=classify,
                label=self.spec.describe(),
                sleep=self._sleep,
            )
