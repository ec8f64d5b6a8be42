"""``gemini:MODEL``: the provider's registration, and its ``LLMCaller`` over the Gemini
API (``streamGenerateContent``), always streamed, through the official ``google-genai``
SDK.

Owns the request (with its ``thinking_config`` from the spec's ``reasoning``), the
client, and the mapping of the SDK's errors; the wire format is the ``gemini`` codec's
(names that start with a letter or ``_``, schemas cleaned of what Gemini refuses,
thought signatures sent back where they came), and retries and cancellation are
``_retry``'s.

The SDK is an optional extra (``cleveragents[gemini]``), imported when a caller is
built, never when ``cleveragents.llm`` is. The caller gives the SDK its own ``httpx2``
client, so that one connection pool serves every call, no other HTTP stack (aiohttp)
is picked up, and errors come from one known library. The SDK's own retries and
automatic function calling stay off; the key is always passed explicitly, and the
Gemini Developer API is always used (``vertexai=False``), whatever the environment says.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import attrs

from cleveragents.tool import LLMRequest

from .._base import SdkCaller
from .._providers import Provider
from .._retry import Failure, classify_common, classify_status, retry_after_seconds
from ..spec import ReasoningSettings

MAX_STOP = 5
"""Gemini takes at most five stop sequences; a call's further ones are left out."""
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_SECONDS = re.compile(r"(\d+(?:\.\d+)?)s")


class GeminiCaller(SdkCaller):
    """Calls one Gemini model; one instance serves every call of the runs that use its
    spec.

    The keyword arguments tune the retry policy; tests shrink them to milliseconds.
    ``sleep`` waits between retries (``asyncio.sleep``; tests may record instead).
    """

    def body(self, request: LLMRequest) -> dict[str, Any]:
        """The keyword arguments of ``generate_content_stream`` (never the key)."""
        spec = self.spec
        history = self._router.messages(request.messages)
        config: dict[str, Any] = {
            "automatic_function_calling": {"disable": True},
            "automatic_continuation": False,
        }
        if history.system is not None:
            config["system_instruction"] = history.system
        tools = self.provider_tools(request)
        if tools:
            config["tools"] = tools
        cap = self.answer_cap(request)
        if cap is not None:
            config["max_output_tokens"] = cap
        temperature = self.temperature(request)
        if temperature is not None:
            config["temperature"] = temperature
        settings = request.settings
        if settings is not None and settings.stop:
            config["stop_sequences"] = list(settings.stop[:MAX_STOP])
        thinking = thinking_config(spec.reasoning)
        if thinking:
            config["thinking_config"] = thinking
        return {"model": spec.model, "contents": history.messages, "config": config}

    def _new_client(self, key: str) -> _Client:
        import httpx2

        http = httpx2.AsyncClient(timeout=self.spec.timeout_s)
        options = self._sdk.types.HttpOptions(
            base_url=self.base_url,
            timeout=round(self.spec.timeout_s * 1000),
            httpx_async_client=http,
        )
        sdk = self._sdk.Client(api_key=key, vertexai=False, http_options=options)
        return _Client(sdk, http)

    async def _close_client(self, client: _Client) -> None:
        client.sdk.close()  # the SDK's own sync client, which we never use
        await client.http.aclose()

    async def _open_stream(self, client: _Client, body: dict[str, Any]) -> _Stream:
        return _Stream(await client.sdk.aio.models.generate_content_stream(**body))

    def _chunk(self, item: Any) -> Mapping[str, Any]:
        return item.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[no-any-return]

    def _classify(self, exc: BaseException, secrets: Sequence[str]) -> Failure | None:
        spec = self.spec
        common = classify_common(exc, timeout_s=spec.timeout_s, secrets=secrets)
        if common is not None:
            return common
        if isinstance(exc, MalformedResponse):
            return Failure("the provider sent a malformed response", retryable=False)
        errors = self._sdk.errors
        if not isinstance(exc, errors.APIError):
            return None
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        status = exc.code if isinstance(exc.code, int) else 0
        if status == 429:  # Gemini says "quota" for rate limits too; RetryInfo tells
            wait = _retry_delay(exc.details)
            wait = wait if wait is not None else retry_after_seconds(headers)
            return Failure("rate limited (HTTP 429)", True, wait)
        if status >= 400:
            return classify_status(
                status,
                headers,
                exc.details,
                key_env=spec.key_env(),
                model=spec.model,
                secrets=secrets,
            )
        return Failure(f"the provider client failed ({type(exc).__name__})", retryable=False)


@attrs.frozen
class _Client:
    """The SDK's client and the HTTP client it was given (ours to close)."""

    sdk: Any
    http: Any


class MalformedResponse(Exception):
    """A streamed chunk that is not JSON, or not a ``GenerateContentResponse``."""


class _Stream:
    """The SDK's async generator of chunks as the async context manager the retry loop
    expects; a chunk the SDK cannot read becomes :class:`MalformedResponse`."""

    def __init__(self, chunks: AsyncIterator[Any]) -> None:
        self._chunks = chunks

    async def __aenter__(self) -> _Stream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._chunks.__anext__()
        except ValueError:  # JSONDecodeError, pydantic's ValidationError, the SDK's own
            raise MalformedResponse from None


def thinking_config(reasoning: ReasoningSettings | None) -> dict[str, Any]:
    """The ``thinking_config`` of a spec's ``reasoning`` (empty: send none).

    ``budgetTokens`` becomes ``thinking_budget`` (Gemini 2.5, still read by 3); else
    ``effort`` becomes the ``thinking_level`` of the same name (Gemini 3). Gemini refuses
    both at once, so a given budget wins, as it does for Anthropic. A level a model does
    not offer (``minimal`` on a Pro) is sent as asked: the model's 400 says so, where a
    quiet substitute would not. ``summary`` asks for thought summaries
    (``include_thoughts``), streamed as reasoning.
    """
    if reasoning is None:
        return {}
    config: dict[str, Any] = {}
    if reasoning.budget_tokens is not None:
        config["thinking_budget"] = reasoning.budget_tokens
    elif reasoning.effort is not None:
        config["thinking_level"] = reasoning.effort.upper()
    if reasoning.summary:
        config["include_thoughts"] = True
    return config


def _retry_delay(details: object) -> float | None:
    """The wait a Gemini error's ``RetryInfo`` asks for (``"23s"``), if any."""
    if isinstance(details, Mapping) and isinstance(details.get("error"), Mapping):
        details = details["error"]
    items = details.get("details") if isinstance(details, Mapping) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, Mapping) and item.get("@type") == _RETRY_INFO:
            match = _SECONDS.fullmatch(str(item.get("retryDelay") or ""))
            if match:
                return float(match.group(1))
    return None


PROVIDER = Provider(
    name="gemini",
    summary="the Gemini API (Google AI Studio keys)",
    example="gemini-2.5-flash",
    # As the google-genai SDK reads them: GOOGLE_API_KEY wins when both are set.
    key_envs=("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    package="google.genai",
    extra="gemini",
    loggers=(
        "google_genai",
        "google_genai._api_client",
        "google_genai._common",
        "google_genai.models",
        "google_genai.types",
    ),
    codec="gemini",
    adapter=GeminiCaller,
)
