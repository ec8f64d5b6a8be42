"""``anthropic:MODEL``: the provider's registration, and its ``LLMCaller`` over the
messages API, always streamed.

Owns the request body and the client; the wire format is the ``anthropic`` codec's, and
retries, error messages and cancellation are ``_retry``'s.

The ``anthropic`` SDK is an optional extra, imported when a caller is built, never when
``cleveragents.llm`` is. The SDK's own retries are off (``max_retries=0``) so that one
policy, with its bounds and its refusal to repeat streamed text, applies everywhere.
The key is always passed explicitly, so the SDK never falls back to profiles on disk.
"""

from __future__ import annotations

from typing import Any

from cleveragents.tool import LLMRequest

from .._base import SdkCaller
from .._providers import Provider

DEFAULT_MAX_TOKENS = 4096
"""The messages API requires ``max_tokens``; used when the spec sets none."""


class AnthropicCaller(SdkCaller):
    """Calls one Claude model; one instance serves every call of the runs that use its spec.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

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
        tools = self.provider_tools(request)
        if tools:
            body["tools"] = tools
        if spec.temperature is not None:
            # Recent SDKs dropped the keyword; the API still takes the field.
            body["extra_body"] = {"temperature": spec.temperature}
        return body

    def _new_client(self, key: str) -> Any:
        return self._sdk.AsyncAnthropic(
            api_key=key, base_url=self.base_url, timeout=self.spec.timeout_s, max_retries=0
        )

    async def _close_client(self, client: Any) -> None:
        await client.close()

    def _open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        return client.messages.create(**body)


PROVIDER = Provider(
    name="anthropic",
    summary="the Anthropic messages API",
    example="claude-sonnet-4-5",
    key_envs=("ANTHROPIC_API_KEY",),
    package="anthropic",
    extra="anthropic",
    loggers=(
        "anthropic",
        "anthropic._base_client",
        "anthropic._response",
        "anthropic._legacy_response",
        "anthropic._tracing",
    ),
    codec="anthropic",
    adapter=AnthropicCaller,
)
