"""How the tests fake each built-in HTTP provider on loopback: its wire shapes (streams,
error bodies, rate-limit hints), where it sends the key, and how to build its caller.

One :class:`Kit` per provider in :data:`KITS`, keyed by the provider's registered name.
The contract suite (``test_provider_contract.py``), the key-leak tests and the client
tests are parametrised over the provider table and take their wire shapes from here; a
registered SDK provider without a kit fails the contract suite. Each shape is the real
API's: what its SDK parses and what its server sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from cleveragents.llm import get_provider, providers
from cleveragents.llm._base import SdkCaller
from cleveragents.llm.spec import ModelSpec
from kit.fake_openai import responses_error_event, responses_text_events
from kit.loopback import LoopbackServer, Recorded, Reply, data, event, json_reply, sse_reply

# -- OpenAI chat completions ---------------------------------------------------------------


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return data(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def openai_usage_chunk(prompt: int, completion: int) -> str:
    return data(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
    )


def openai_text_stream(text: str = "Hello.") -> Reply:
    return sse_reply(
        openai_chunk({"role": "assistant", "content": text}, finish="stop"),
        openai_usage_chunk(3, 1),
        "data: [DONE]\n\n",
    )


def openai_error_body(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


# -- Anthropic messages --------------------------------------------------------------------


def anthropic_message_start(input_tokens: int = 10) -> str:
    return event(
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        }
    )


def anthropic_text_block(index: int, *pieces: str) -> list[str]:
    start = {"type": "text", "text": ""}
    return [
        event({"type": "content_block_start", "index": index, "content_block": start}),
        *(
            event(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
            )
            for piece in pieces
        ),
        event({"type": "content_block_stop", "index": index}),
    ]


def anthropic_message_end(stop: str, output_tokens: int) -> list[str]:
    return [
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            }
        ),
        event({"type": "message_stop"}),
    ]


def anthropic_text_stream(text: str = "Hello.") -> Reply:
    return sse_reply(
        anthropic_message_start(),
        *anthropic_text_block(0, text),
        *anthropic_message_end("end_turn", 2),
    )


def anthropic_error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


# -- Gemini generateContent ----------------------------------------------------------------


def gemini_chunk(*parts: dict[str, Any], finish: str | None = None, usage: bool = False) -> str:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
    if usage:
        body["usageMetadata"] = {
            "promptTokenCount": 12,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 2,
            "totalTokenCount": 19,
        }
    return data(body)


def gemini_text_stream(text: str = "Hello.") -> Reply:
    return sse_reply(gemini_chunk({"text": text}, finish="STOP", usage=True))


def gemini_error_body(status: int, name: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": name, **extra}}


def gemini_retry_info(delay: str) -> dict[str, Any]:
    return {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]}


# -- the kits ------------------------------------------------------------------------------


@attrs.frozen
class Kit:
    """One provider's API as the loopback server fakes it."""

    name: str
    key_env: str
    """The variable the tests set the key in (the provider's last: Gemini's
    ``GEMINI_API_KEY``, which ``GOOGLE_API_KEY`` would override, is unset by
    :meth:`set_key`)."""
    base_path: str
    """What follows the server's root in ``baseUrl`` (``/v1`` for OpenAI)."""
    model: str
    text_stream: Callable[[str], Reply]
    """A whole answer of that text, with its finish and usage."""
    unfinished: Callable[[str], Reply]
    """A stream that carries the text, then ends cleanly without a finish."""
    text_then_hang: Callable[[str], Reply]
    """A stream that carries the text, then holds the connection."""
    text_then_cut: Callable[[str], Reply]
    """A stream that carries the text and a broken event, then drops the connection."""
    error_body: Callable[[str], dict[str, Any]]
    """The body of a 400 whose reason is the text."""
    auth_error: Callable[[int, str], Reply]
    """A 401 or 403 whose message echoes the text (a key)."""
    not_found: Callable[[], Reply]
    overflow: Callable[[], Reply]
    """A 400 saying the conversation is past the context window."""
    transient: Callable[[int], Reply]
    """A server error of that status (5xx, or Anthropic's 529)."""
    transient_status: int
    rate_limited: Callable[[float], Reply]
    """A 429 asking, in the provider's own way, to wait that many seconds."""
    error_event: Callable[[str, str], str] | None
    """An error event inside a stream, of a kind and a message; ``None`` where the API
    has none."""
    retryable_event_kind: str | None
    sent_key: Callable[[Recorded], str]

    def set_key(self, monkeypatch: Any, key: str) -> None:
        for name in get_provider(self.name).key_envs:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv(self.key_env, key)

    def spec(self, server: LoopbackServer, **spec_kw: Any) -> ModelSpec:
        base_url = spec_kw.pop("base_url", None) or server.base_url + self.base_path
        return ModelSpec(self.name, model=self.model, base_url=base_url, **spec_kw)

    def caller(self, server: LoopbackServer, **kw: Any) -> SdkCaller:
        """The provider's adapter on the server, with retry waits of milliseconds unless
        ``base_delay_s``, ``max_delay_s`` or ``sleep`` say otherwise."""
        tuning = {k: kw.pop(k) for k in ("base_delay_s", "max_delay_s", "sleep") if k in kw}
        tuning.setdefault("base_delay_s", 0.001)
        tuning.setdefault("max_delay_s", 0.002)
        adapter: Any = get_provider(self.name).adapter
        caller: SdkCaller = adapter(self.spec(server, **kw), **tuning)
        return caller


def _openai_rate_limited(delay: float) -> Reply:
    return json_reply(
        openai_error_body("Rate limit reached", "rate_limit_exceeded"),
        429,
        **{"Retry-After": f"{delay:g}"},
    )


OPENAI = Kit(
    name="openai",
    key_env="OPENAI_API_KEY",
    base_path="/v1",
    model="gpt-test",
    text_stream=openai_text_stream,
    unfinished=lambda text: sse_reply(openai_chunk({"role": "assistant", "content": text})),
    text_then_hang=lambda text: sse_reply(
        openai_chunk({"role": "assistant", "content": text}), hang=True
    ),
    text_then_cut=lambda text: sse_reply(
        openai_chunk({"role": "assistant", "content": text}), "data: {brok", cut=True
    ),
    error_body=lambda text: openai_error_body(text),
    auth_error=lambda status, echo: json_reply(
        openai_error_body(f"Incorrect API key provided: {echo}.", "invalid_api_key"), status
    ),
    not_found=lambda: json_reply(
        openai_error_body("The model `gpt-nope` does not exist", "model_not_found"), 404
    ),
    overflow=lambda: json_reply(
        openai_error_body(
            "This model's maximum context length is 8192 tokens. However, you requested 9000.",
            "context_length_exceeded",
        ),
        400,
    ),
    transient=lambda status: json_reply({"error": {"message": "oops"}}, status),
    transient_status=503,
    rate_limited=_openai_rate_limited,
    error_event=lambda kind, text: data({"error": {"message": text, "type": kind}}),
    retryable_event_kind="server_error",
    sent_key=lambda sent: sent.headers["authorization"].removeprefix("Bearer "),
)

OPENAI_RESPONSES = Kit(
    name="openai-responses",
    key_env="OPENAI_API_KEY",
    base_path="/v1",
    model="gpt-test",
    text_stream=lambda text: sse_reply(*responses_text_events(text)),
    unfinished=lambda text: sse_reply(*responses_text_events(text, finish=False)),
    # created, the message added, the first half of its text: then nothing more
    text_then_hang=lambda text: sse_reply(*responses_text_events(text)[:3], hang=True),
    text_then_cut=lambda text: sse_reply(
        *responses_text_events(text)[:3], "event: response.output_text.delta\ndata: {brok", cut=True
    ),
    error_body=OPENAI.error_body,
    auth_error=OPENAI.auth_error,
    not_found=OPENAI.not_found,
    overflow=OPENAI.overflow,
    transient=OPENAI.transient,
    transient_status=503,
    rate_limited=_openai_rate_limited,
    error_event=responses_error_event,
    retryable_event_kind="server_error",
    sent_key=OPENAI.sent_key,
)

ANTHROPIC = Kit(
    name="anthropic",
    key_env="ANTHROPIC_API_KEY",
    base_path="",
    model="claude-test",
    text_stream=anthropic_text_stream,
    unfinished=lambda text: sse_reply(
        anthropic_message_start(), *(anthropic_text_block(0, text) if text else [])
    ),
    text_then_hang=lambda text: sse_reply(
        anthropic_message_start(), *anthropic_text_block(0, text)[:2], hang=True
    ),
    text_then_cut=lambda text: sse_reply(
        anthropic_message_start(),
        *anthropic_text_block(0, text)[:2],
        "event: content_block_delta\ndata: {brok",
        cut=True,
    ),
    error_body=lambda text: anthropic_error_body("invalid_request_error", text),
    auth_error=lambda status, echo: json_reply(
        anthropic_error_body(
            "authentication_error" if status == 401 else "permission_error",
            f"invalid x-api-key {echo}",
        ),
        status,
    ),
    not_found=lambda: json_reply(anthropic_error_body("not_found_error", "model: nope"), 404),
    overflow=lambda: json_reply(
        anthropic_error_body(
            "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
        ),
        400,
    ),
    transient=lambda status: json_reply(
        anthropic_error_body("overloaded_error" if status == 529 else "api_error", "busy"),
        status,
    ),
    transient_status=529,
    rate_limited=lambda delay: json_reply(
        anthropic_error_body("rate_limit_error", "slow down"),
        429,
        **{"retry-after-ms": f"{delay * 1000:g}"},
    ),
    error_event=lambda kind, text: event(anthropic_error_body(kind, text)),
    retryable_event_kind="overloaded_error",
    sent_key=lambda sent: (
        sent.headers.get("x-api-key") or sent.headers["authorization"].removeprefix("Bearer ")
    ),
)

_GEMINI_STATUS = {
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
}

GEMINI = Kit(
    name="gemini",
    key_env="GEMINI_API_KEY",
    base_path="",
    model="gemini-test",
    text_stream=gemini_text_stream,
    unfinished=lambda text: sse_reply(gemini_chunk({"text": text})),
    text_then_hang=lambda text: sse_reply(gemini_chunk({"text": text}), hang=True),
    text_then_cut=lambda text: sse_reply(gemini_chunk({"text": text}), "data: {brok", cut=True),
    error_body=lambda text: gemini_error_body(400, "INVALID_ARGUMENT", text),
    auth_error=lambda status, echo: json_reply(
        gemini_error_body(status, _GEMINI_STATUS[status], f"API key not valid: {echo}"), status
    ),
    not_found=lambda: json_reply(
        gemini_error_body(404, "NOT_FOUND", "models/nope is not found for API version v1"), 404
    ),
    overflow=lambda: json_reply(
        gemini_error_body(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
        ),
        400,
    ),
    transient=lambda status: json_reply(
        gemini_error_body(status, _GEMINI_STATUS[status], "The model is overloaded."), status
    ),
    transient_status=503,
    rate_limited=lambda delay: json_reply(
        gemini_error_body(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota.",
            **gemini_retry_info(f"{delay:g}s"),
        ),
        429,
    ),
    error_event=None,
    retryable_event_kind=None,
    sent_key=lambda sent: sent.headers["x-goog-api-key"],
)

KITS = {kit.name: kit for kit in (OPENAI, OPENAI_RESPONSES, ANTHROPIC, GEMINI)}


def sdk_providers() -> list[str]:
    """The registered providers whose adapter stands on an SDK: the contract's subjects."""
    return [p.name for p in providers() if p.package is not None]


def kits() -> list[Kit]:
    """The kit of every SDK provider that has one (the contract suite checks they all
    do), in the table's order."""
    return [KITS[name] for name in sdk_providers() if name in KITS]
