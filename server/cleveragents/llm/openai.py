"""``openai:MODEL``: an ``LLMCaller`` over the chat-completions API, always streamed.

Works with OpenAI and with any compatible server through ``baseUrl`` (vLLM, Ollama,
llama.cpp, ...). Owns the request body and the client's lifetime; the wire format is
``ToolCallRouter("openai")``'s, and retries, error messages and cancellation are
``_retry``'s.

The ``openai`` SDK is an optional extra, imported when a caller is built, never when
``cleveragents.llm`` is. The SDK's own retries are off (``max_retries=0``) so that one
policy, with its bounds and its refusal to repeat streamed text, applies everywhere.
"""

from __future__ import annotations

import functools
from typing import Any

from ..tool._types import LLMRequest, LLMResponse
from ._base import SdkCaller
from ._retry import classify_sdk_error, stream_with_retries

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
NO_KEY = "no-key"
"""Sent to keyless local servers (Ollama, llama.cpp), which ignore it."""


class OpenAIChatCaller(SdkCaller):
    """Calls one chat-completions model; one instance serves every iteration of a run.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

    provider = "openai"
    package = "openai"
    example_spec = "openai:gpt-4o-mini"
    default_key_env = DEFAULT_KEY_ENV

    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The chat-completions request body for one call (the key is never in it)."""
        spec = self.spec
        body: dict[str, Any] = {
            "model": spec.model,
            "messages": self._router.messages(request.messages).messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = self._router.tools(request.tools)
        if tools:
            body["tools"] = tools
        if spec.max_tokens is not None:
            # OpenAI's newer models refuse max_tokens; compatible servers may not know
            # max_completion_tokens yet.
            body["max_completion_tokens" if spec.base_url is None else "max_tokens"] = (
                spec.max_tokens
            )
        if spec.temperature is not None:
            body["temperature"] = spec.temperature
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
        async with self._sdk.AsyncOpenAI(
            api_key=key or NO_KEY,
            base_url=self.spec.base_url,
            timeout=self.spec.timeout_s,
            max_retries=0,
        ) as client:
            return await stream_with_retries(
                lambda: client.chat.completions.create(**body),
                start=lambda: self._router.stream(iteration=request.iteration),
                on_delta=request.on_delta,
                policy=self._policy,
                classify=classify,
                label=self.spec.describe(),
                sleep=self._sleep,
            )
