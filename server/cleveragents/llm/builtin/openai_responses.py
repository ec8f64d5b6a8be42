"""``openai-responses:MODEL`` (or ``{"provider": "openai", "api": "responses"}``): the
provider's registration, and its ``LLMCaller`` over OpenAI's Responses API, always
streamed.

Owns the request body; the wire format is the ``openai_responses`` codec's, and the
client, retries, error messages and cancellation are the chat adapter's and ``_retry``'s.

Every request goes with ``store: false``: the history travels whole in each request, as
for the other adapters, and nothing is kept on OpenAI's side between calls. So a
reasoning model's reasoning items can only go back with their encrypted content: with
``reasoning`` in the spec, ``include: ["reasoning.encrypted_content"]`` asks for it, and
the codec sends each item back before the calls that followed it. Without ``reasoning``
neither field is sent, since models that do not reason refuse the include.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cleveragents.tool import LLMRequest

from .._providers import Provider
from .openai import OpenAIChatCaller

ENCRYPTED_REASONING = "reasoning.encrypted_content"


class OpenAIResponsesCaller(OpenAIChatCaller):
    """Calls one model through the Responses API; one instance serves every call of the
    runs that use its spec."""

    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The Responses request body for one call (the key is never in it)."""
        spec = self.spec
        body: dict[str, Any] = {
            "model": spec.model,
            "input": self._router.messages(request.messages).messages,
            "stream": True,
            "store": False,
        }
        tools = self.provider_tools(request)
        if tools:
            body["tools"] = tools
        cap = self.answer_cap(request)
        if cap is not None:
            body["max_output_tokens"] = cap
        # Reasoning models refuse temperature: a call's own is advisory. The API takes
        # no stop sequences at all.
        temperature = self.temperature(request) if spec.reasoning is None else spec.temperature
        if temperature is not None:
            body["temperature"] = temperature
        if spec.reasoning is not None:
            reasoning: dict[str, Any] = {}
            if self._effort is not None:
                reasoning["effort"] = self._effort
            if spec.reasoning.summary:
                reasoning["summary"] = "auto"
            body["reasoning"] = reasoning
            body["include"] = [ENCRYPTED_REASONING]
        return body

    def _open_stream(self, client: Any, body: dict[str, Any]) -> Any:
        return client.responses.create(**body)

    def _chunk(self, item: Any) -> Mapping[str, Any]:
        """An event as the server sent it: fields it left out stay out, so a reasoning
        item goes back exactly as it came (no ``null`` for what it never had)."""
        if isinstance(item, Mapping):
            return item
        return item.model_dump(mode="json", exclude_unset=True)  # type: ignore[no-any-return]


PROVIDER = Provider(
    name="openai-responses",
    summary="OpenAI's Responses API, with reasoning items passed back "
    '(also `{"provider": "openai", "api": "responses"}`)',
    example="gpt-5-mini",
    key_envs=("OPENAI_API_KEY",),
    package="openai",
    extra="openai",
    loggers=("openai", "openai._base_client", "openai._response", "openai._legacy_response"),
    codec="openai_responses",
    adapter=OpenAIResponsesCaller,
    apis=(("chat", "openai"), ("responses", "openai-responses")),
)
