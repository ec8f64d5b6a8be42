"""``anthropic:MODEL``: an ``LLMCaller`` over the messages API, always streamed.

Owns the request body and the client's lifetime; the wire format is
``ToolCallRouter("anthropic")``'s, and retries, error messages and cancellation are
``_retry``'s.

The ``anthropic`` SDK is an optional extra, imported when a caller is built, never when
``cleveragents.llm`` is. The SDK's own retries are off (``max_retries=0``) so that one
policy, with its bounds and its refusal to repeat streamed text, applies everywhere.
The key is always passed explicitly, so the SDK never falls back to profiles on disk.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from ..tool._errors import ModelConfigError
from ..tool._router import ToolCallRouter
from ..tool._types import LLMRequest, LLMResponse
from ._retry import RetryPolicy, Sleep, classify_sdk_error, run_cancellable, stream_with_retries
from .spec import ModelSpec

DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = 4096
"""The messages API requires ``max_tokens``; used when the spec sets none."""
NO_KEY = "no-key"
"""Sent to keyless compatible servers, which ignore it."""


class AnthropicCaller:
    """Calls one Claude model; one instance serves every iteration of a run.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

    def __init__(
        self,
        spec: ModelSpec,
        *,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        max_retry_after_s: float = 60.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not spec.model:
            raise ModelConfigError(
                "the anthropic model spec needs a model, e.g. 'anthropic:claude-sonnet-4-5'"
            )
        try:
            import anthropic
        except ImportError:
            raise ModelConfigError(
                "the anthropic provider needs the 'anthropic' package: "
                "pip install 'cleveragents[anthropic]'"
            ) from None
        self.spec = spec
        self._sdk: Any = anthropic
        self._key_env = spec.api_key_env or DEFAULT_KEY_ENV
        if not spec.api_key() and not spec.base_url:
            raise ModelConfigError(
                f"no API key for {spec.describe()}: set {self._key_env}, "
                "or give a baseUrl for a server that needs none"
            )
        self._router = ToolCallRouter("anthropic")
        self._policy = RetryPolicy(spec.max_retries, base_delay_s, max_delay_s, max_retry_after_s)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"AnthropicCaller({self.spec.describe()!r})"

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        return await run_cancellable(self._call(request), request.cancel)

    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for one call (never the key)."""
        spec = self.spec
        history = self._router.messages(request.messages)
        body: dict[str, Any] = {
            "model": spec.model,
            "max_tokens": spec.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": history.messages,
            "stream": True,
        }
        if history.system is not None:
            body["system"] = history.system
        tools = self._router.tools(request.tools)
        if tools:
            body["tools"] = tools
        if spec.temperature is not None:
            # Recent SDKs dropped the keyword; the API still takes the field.
            body["extra_body"] = {"temperature": spec.temperature}
        return body

    async def _call(self, request: LLMRequest) -> LLMResponse:
        body = self.body(request)
        key = self.spec.api_key()
        classify = functools.partial(
            classify_sdk_error,
            sdk=self._sdk,
            timeout_s=self.spec.timeout_s,
            key_env=self._key_env,
            model=self.spec.model,
            secrets=(key,) if key else (),
        )
        async with self._sdk.AsyncAnthropic(
            api_key=key or NO_KEY,
            base_url=self.spec.base_url,
            timeout=self.spec.timeout_s,
            max_retries=0,
        ) as client:
            return await stream_with_retries(
                lambda: client.messages.create(**body),
                start=lambda: self._router.stream(iteration=request.iteration),
                on_delta=request.on_delta,
                policy=self._policy,
                classify=classify,
                label=self.spec.describe(),
                sleep=self._sleep,
            )
