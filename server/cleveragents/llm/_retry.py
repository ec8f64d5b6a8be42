"""What the HTTP provider adapters share: retries, error mapping and cancellation.

Owns:
- which failures are retried (429, 408/409, 5xx, timeouts, dropped connections) and how
  long to wait (``retry-after-ms`` / ``Retry-After``, else exponential backoff with
  jitter), bounded by ``ModelSpec.max_retries``;
- the short, key-free ``ModelProviderError`` messages (see the table in docs/models.md);
- aborting the in-flight call when the run's ``CancelToken`` fires.

Deliberately does not import any SDK at module level. The ``openai`` and ``anthropic``
SDKs are generated from one template, so their exceptions share names and attributes
(``APIStatusError.status_code/response/body``, ``APITimeoutError``, ...): those adapters
pass their SDK module to :func:`classify_sdk_error`; the Gemini adapter maps its SDK's
own errors, on top of :func:`classify_common` and :func:`classify_status`. SDK
exceptions never leave the adapters: the error raised is ours, with its context
suppressed, because the SDK's text carries the provider's response body.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from cleveragents.tool import CancelToken, LLMResponse, ProviderStreamError

from ._redact import Redactor
from .errors import ContextOverflowError, ModelProviderError

log = logging.getLogger(__name__)

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]

_MAX_DETAIL = 200
_MAX_SCAN = 16_384
"""Error text past this is dropped unread: bodies can be huge, and only 200 show."""
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|prompt is too long|too many tokens"
    r"|exceeds? the (available|maximum)",
    re.IGNORECASE,
)
_URL = re.compile(r"https?://\S+")
"""Left out of the overflow match: Anthropic's thinking-budget refusal links to a page
section named ``max-tokens-and-context-window-size``."""
_RETRYABLE_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "server_error", "timeout_error"}
)


class StreamEndedEarly(Exception):
    """The stream closed cleanly but the model never said it had finished."""


@attrs.define(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry. ``max_retries`` counts retries, not attempts."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 60.0

    def backoff(self, retry: int, rand: float) -> float:
        """Exponential from ``base_delay_s``, capped, minus up to 25% jitter."""
        delay = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(retry, 32))
        return delay * (1.0 - 0.25 * rand)


@attrs.define(frozen=True, slots=True)
class Failure:
    """One failed attempt, classified. ``message`` is safe to show anyone."""

    message: str
    retryable: bool
    retry_after: float | None = None
    overflow: bool = False
    """The provider refused the request as longer than the context window."""


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    classify: Callable[[BaseException], Failure | None],
    label: str,
    retry_allowed: Callable[[], bool] = lambda: True,
    sleep: Sleep = asyncio.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """Run ``attempt`` until it succeeds, a failure is final, or retries run out.

    ``classify`` returns ``None`` for exceptions that are not the provider's (our own
    bugs): those propagate unchanged. ``retry_allowed`` is asked before each retry; an
    adapter says no once it has reported streamed text, which a retry would repeat.
    """
    retries = 0
    while True:
        try:
            return await attempt()
        except ModelProviderError:
            raise
        except Exception as exc:  # the one SDK boundary of the adapters
            failure = classify(exc)
            if failure is None:
                raise
            log.debug("%s: attempt %d failed: %s", label, retries + 1, type(exc).__name__)
        if not failure.retryable or not retry_allowed() or retries >= policy.max_retries:
            suffix = f" (gave up after {retries + 1} attempts)" if failure.retryable else ""
            error = ContextOverflowError if failure.overflow else ModelProviderError
            raise error(f"{label}: {failure.message}{suffix}") from None
        wait = failure.retry_after
        if wait is not None and wait > policy.max_retry_after_s:
            raise ModelProviderError(
                f"{label}: {failure.message}; the provider asked to wait {wait:.0f}s, "
                f"longer than the {policy.max_retry_after_s:.0f}s limit"
            ) from None
        if wait is None:
            wait = policy.backoff(retries, rand())
        retries += 1
        log.info(
            "%s: %s; retry %d of %d in %.2fs",
            label,
            failure.message,
            retries,
            policy.max_retries,
            wait,
        )
        await sleep(wait)


class Accumulator(Protocol):
    """What ``ToolCallRouter.stream()`` returns: chunks in, the response out."""

    def feed(self, chunk: Mapping[str, Any], /) -> str: ...

    def take_reasoning(self) -> str: ...

    def result(self) -> LLMResponse: ...


async def stream_with_retries(
    open_stream: Callable[[], Awaitable[Any]],
    *,
    start: Callable[[], Accumulator],
    on_delta: Callable[[str], None],
    on_reasoning: Callable[[str], None] = lambda text: None,
    policy: RetryPolicy,
    classify: Callable[[BaseException], Failure | None],
    label: str,
    sleep: Sleep = asyncio.sleep,
    as_chunk: Callable[[Any], Mapping[str, Any]] = lambda item: item.model_dump(mode="json"),
) -> LLMResponse:
    """One streamed model call with retries: ``open_stream`` returns an SDK stream of
    items, fed as dicts (``as_chunk``) to a fresh accumulator from ``start`` per attempt.

    Text goes to ``on_delta`` as it arrives, reasoning to ``on_reasoning``; once either
    has, a failure is final, since a retry would report that text twice. A stream that
    closes without a stop reason is a failure too: a silently truncated answer is worse
    than an error.
    """
    streamed = False

    async def attempt() -> LLMResponse:
        nonlocal streamed
        accumulator = start()
        stream = await open_stream()
        async with stream:
            async for item in stream:
                text = accumulator.feed(as_chunk(item))
                thought = accumulator.take_reasoning()
                if thought:
                    streamed = True
                    on_reasoning(thought)
                if text:
                    streamed = True
                    on_delta(text)
        response = accumulator.result()
        if response.stop_reason is None:
            raise StreamEndedEarly
        return response

    return await call_with_retries(
        attempt,
        policy=policy,
        classify=classify,
        label=label,
        retry_allowed=lambda: not streamed,
        sleep=sleep,
    )


async def run_cancellable(call: Coroutine[Any, Any, T], cancel: CancelToken) -> T:
    """Await ``call`` in its own task, and cancel that task when ``cancel`` fires.

    The token may fire from any thread; the task is cancelled on its own loop, which
    closes the open HTTP response at once. Raises ``asyncio.CancelledError`` then.
    """
    loop = asyncio.get_running_loop()
    task = loop.create_task(call)

    def on_cancel() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(task.cancel)

    remove = cancel.add_callback(on_cancel)
    try:
        return await task
    finally:
        remove()


def classify_sdk_error(
    exc: BaseException,
    sdk: Any,
    *,
    timeout_s: float,
    key_env: str,
    model: str | None,
    secrets: Sequence[str] = (),
) -> Failure | None:
    """Map an exception of the ``openai`` or ``anthropic`` SDK (or of their HTTP layer)
    to a :class:`Failure`; ``None`` when it is neither."""
    common = classify_common(exc, timeout_s=timeout_s, secrets=secrets)
    if common is not None:
        return common
    if isinstance(exc, sdk.APITimeoutError):
        return Failure(f"no response within {timeout_s:g}s", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        return Failure("could not connect to the provider (check baseUrl)", retryable=True)
    if isinstance(exc, sdk.APIStatusError) and exc.status_code >= 400:
        return classify_status(
            exc.status_code,
            exc.response.headers,
            exc.body,
            key_env=key_env,
            model=model,
            secrets=secrets,
        )
    if isinstance(exc, sdk.APIError):  # an error event inside a 200 stream
        return _mid_stream(*_error_fields(exc.body), secrets)
    base = getattr(sdk, "OpenAIError", None) or getattr(sdk, "AnthropicError", None)
    if base is not None and isinstance(exc, base):
        return Failure(f"the provider client failed ({type(exc).__name__})", retryable=False)
    return None


def classify_common(
    exc: BaseException, *, timeout_s: float, secrets: Sequence[str] = ()
) -> Failure | None:
    """What every adapter maps alike: a stream cut short, an error event the router
    read, and the HTTP layer's timeouts and connection failures."""
    import httpx2

    if isinstance(exc, StreamEndedEarly):
        return Failure("the stream ended before the model finished", retryable=True)
    if isinstance(exc, ProviderStreamError):
        return _mid_stream(exc.kind, exc.detail, secrets)
    if isinstance(exc, httpx2.TimeoutException):
        return Failure(f"no response within {timeout_s:g}s", retryable=True)
    if isinstance(exc, httpx2.TransportError):
        return Failure("could not connect to the provider (check baseUrl)", retryable=True)
    return None


def _mid_stream(kind: str, detail: str, secrets: Sequence[str]) -> Failure:
    text = _sanitize(detail or kind or "", secrets)
    return Failure(
        f"the provider reported an error mid-stream: {text}".rstrip(": "),
        retryable=kind in _RETRYABLE_TYPES,
    )


def classify_status(
    status: int,
    headers: Mapping[str, str],
    body: object,
    *,
    key_env: str,
    model: str | None,
    secrets: Sequence[str] = (),
) -> Failure:
    """Classify an HTTP error status with the provider's error body."""
    kind, detail = _error_fields(body)
    if status in (401, 403):
        return Failure(f"authentication failed (HTTP {status}): check {key_env}", False)
    if status == 404:
        return Failure(
            f"model {model!r} or its endpoint was not found (HTTP 404): "
            "check the model name and baseUrl",
            False,
        )
    if status in (400, 413, 422) and _CONTEXT_OVERFLOW.search(_URL.sub("", f"{kind} {detail}")):
        return Failure(
            f"the conversation is longer than the model's context window (HTTP {status})",
            False,
            overflow=True,
        )
    if status == 429 and "quota" in f"{kind} {detail}".lower():
        return Failure("quota exceeded (HTTP 429): check the account's plan and billing", False)
    retry_after = retry_after_seconds(headers)
    if status == 429:
        return Failure("rate limited (HTTP 429)", True, retry_after)
    if status in (408, 409) or status >= 500:
        return Failure(f"provider error (HTTP {status})", True, retry_after)
    text = _sanitize(detail or kind or "", secrets)
    return Failure(f"request rejected (HTTP {status}): {text}".rstrip(": "), False)


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` (seconds or a date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(millis) / 1000.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - (time.time() if now is None else now))


def _error_fields(body: object) -> tuple[str, str]:
    """(type-or-code, message) from either SDK's error body, which may be nested."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if isinstance(body, Mapping):
        kind = body.get("code") or body.get("type") or ""
        return str(kind), str(body.get("message") or "")
    if isinstance(body, str):
        return "", body
    return "", ""


def _sanitize(text: str, secrets: Sequence[str]) -> str:
    """One short line, with the secrets, every word sharing 6 characters with one, key
    shapes, URL credentials and query strings cut out (see ``_redact``).

    Cut before shortening: shortening first could leave a fragment too short to be
    recognised at the end of the line.
    """
    text = Redactor.of(secrets)(" ".join(text[:_MAX_SCAN].split()))
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."
