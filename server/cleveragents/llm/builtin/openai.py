"""``openai:MODEL``: the provider's registration, and its ``LLMCaller`` over the
chat-completions API, always streamed.

Works with OpenAI and with any compatible server through ``baseUrl`` (vLLM, Ollama,
llama.cpp, ...). Owns the request body and the client; the wire format is the
``openai`` codec's, and retries, error messages and cancellation are ``_retry``'s. A
hosted service that speaks the same API is one more registration whose ``adapter`` is
:class:`OpenAIChatCaller`, with its own name, key variables and ``base_url``.

The ``openai`` SDK is an optional extra, imported when a caller is built, never when
``cleveragents.llm`` is. The SDK's own retries are off (``max_retries=0``) so that one
policy, with its bounds and its refusal to repeat streamed text, applies everywhere.
"""

from __future__ import annotations

from typing import Any

from cleveragents.tool import LLMRequest

from .._base import SdkCaller
from .._providers import Provider


class OpenAIChatCaller(SdkCaller):
    """Calls one chat-completions model; one instance serves every call of the runs that
    use its spec.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The chat-completions request body for one call (the key is never in it)."""
        spec = self.spec
        body: dict[str, Any] = {
            "model": spec.model,
            "messages": self._router.messages(request.messages).messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = self.provider_tools(request)
        if tools:
            body["tools"] = tools
        if spec.max_tokens is not None:
            # OpenAI's newer models refuse max_tokens; compatible servers may not know
            # max_completion_tokens yet.
            body["max_completion_tokens" if self.base_url is None else "max_tokens"] = (
                spec.max_tokens
            )
        if spec.temperature is not None:
            body["temperature"] = spec.temperature
        return body

    def _new_client(self, key: str) -> Any:
        return self._sdk.AsyncOpenAI(
            api_key=key, base_url=self.base_url, timeout=self.spec.timeout_s, max_retries=0
        )

    async def _close_client(self, client: Any) -> None:
        await client.close()

    def _open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        return client.chat.completions.create(**body)


PROVIDER = Provider(
    name="openai",
    summary="the chat-completions API of OpenAI, or of any compatible server (`baseUrl`)",
    example="gpt-4o-mini",
    key_envs=("OPENAI_API_KEY",),
    package="openai",
    extra="openai",
    loggers=("openai", "openai._base_client", "openai._response", "openai._legacy_response"),
    codec="openai",
    adapter=OpenAIChatCaller,
    apis=(("chat", "openai"), ("responses", "openai-responses")),
)
