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

A spec's ``reasoning`` becomes ``reasoning_effort``; without it the body has no
reasoning field at all. ``summary`` has nothing to map to: OpenAI's chat API streams no
reasoning, and compatible servers stream theirs unasked (the codec reads it). OpenAI's
APIs take a level, never a token budget, so ``budgetTokens`` is refused when the caller
is built rather than dropped unseen.
"""

from __future__ import annotations

from typing import Any

from cleveragents.tool import LLMRequest

from .._base import SdkCaller
from .._providers import Provider
from ..errors import ModelConfigError
from ..spec import ModelSpec

MAX_STOP = 4
"""Chat completions take at most four stop sequences; a call's further ones are left out."""


def reasoning_effort(spec: ModelSpec) -> str | None:
    """The spec's reasoning level for OpenAI's APIs (``None``: send none); a budget,
    which they cannot express, is a ``ModelConfigError`` naming the field to use."""
    reasoning = spec.reasoning
    if reasoning is None:
        return None
    if reasoning.budget_tokens is not None:
        raise ModelConfigError(
            f"{spec.describe()}: OpenAI's APIs take reasoning.effort "
            "(minimal, low, medium or high), not budgetTokens"
        )
    return reasoning.effort


class OpenAIChatCaller(SdkCaller):
    """Calls one chat-completions model; one instance serves every call of the runs that
    use its spec.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

    def __init__(self, spec: ModelSpec, **tuning: Any) -> None:
        self._effort = reasoning_effort(spec)
        super().__init__(spec, **tuning)

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
        cap = self.answer_cap(request)
        if cap is not None:
            # OpenAI's newer models refuse max_tokens; compatible servers may not know
            # max_completion_tokens yet.
            body["max_completion_tokens" if self.base_url is None else "max_tokens"] = cap
        settings = request.settings
        if self._effort is not None:
            # "minimal" is only some models' level: the provider's refusal is the message.
            body["reasoning_effort"] = self._effort
            # Reasoning models refuse temperature and stop: a call's own are advisory.
            if spec.temperature is not None:
                body["temperature"] = spec.temperature
        else:
            temperature = self.temperature(request)
            if temperature is not None:
                body["temperature"] = temperature
            if settings is not None and settings.stop:
                body["stop"] = list(settings.stop[:MAX_STOP])
        return body

    def _new_client(self, key: str) -> Any:
        return self._sdk.AsyncOpenAI(
            api_key=key, base_url=self.base_url, timeout=self.spec.timeout_s, max_retries=0
        )

    async def _close_client(self, client: Any) -> None:
        await client.close()

    def _open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        # The SDK walks every message and tool of a typed body to transform it: 150 ms a
        # call, on the event loop, for a few hundred messages of a long run. Ours are
        # plain JSON already, so they go as extra_body, which the SDK sends as given, in
        # the same place of the same body.
        typed = {k: v for k, v in body.items() if k not in _PLAIN_JSON}
        plain = {k: body[k] for k in _PLAIN_JSON if k in body}
        return client.chat.completions.create(**typed, messages=[], extra_body=plain)


_PLAIN_JSON = ("messages", "tools")


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
