"""The retry policy and error classification the HTTP adapters share."""

from __future__ import annotations

import email.utils
from typing import Any

import pytest

from cleveragents.llm._retry import (
    Failure,
    RetryPolicy,
    call_with_retries,
    classify_status,
    retry_after_seconds,
)
from cleveragents.llm.errors import ModelProviderError
from kit.loopback import RecordingSleep

NOW = 1_700_000_000.0


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    date = email.utils.formatdate(NOW + 12, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=NOW) == 12.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_doubles_up_to_the_cap_with_at_most_a_quarter_of_jitter() -> None:
    policy = RetryPolicy(max_retries=9, base_delay_s=0.5, max_delay_s=4.0)
    assert [policy.backoff(n, 0.0) for n in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert policy.backoff(1, 1.0) == 0.75


@pytest.mark.parametrize(
    ("status", "body", "retryable"),
    [
        (401, {"error": {"message": "bad key"}}, False),
        (403, None, False),
        (404, None, False),
        (400, {"error": {"message": "maximum context length is 4096 tokens"}}, False),
        (429, {"error": {"message": "slow", "code": "rate_limit_exceeded"}}, True),
        (429, {"error": {"message": "x", "code": "insufficient_quota"}}, False),
        (500, None, True),
        (529, {"type": "error", "error": {"type": "overloaded_error"}}, True),
        (408, None, True),
        (422, {"detail": "bad"}, False),
    ],
)
def test_statuses_are_classified_as_retryable_or_final(
    status: int, body: Any, retryable: bool
) -> None:
    failure = classify_status(status, {}, body, key_env="K", model="m")
    assert failure.retryable is retryable


def test_rejection_details_are_short_and_free_of_anything_key_like() -> None:
    body = {"error": {"message": "bad header sk-live-abcdefgh1234 and my-secret " + "x" * 500}}
    failure = classify_status(400, {}, body, key_env="K", model="m", secrets=["my-secret"])
    assert "sk-live" not in failure.message
    assert "my-secret" not in failure.message
    assert len(failure.message) < 260


async def test_unclassified_exceptions_propagate_unchanged() -> None:
    async def attempt() -> None:
        raise KeyError("our own bug")

    with pytest.raises(KeyError):
        await call_with_retries(attempt, policy=RetryPolicy(), classify=lambda exc: None, label="x")


async def test_retries_stop_when_the_caller_forbids_them() -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError

    sleep = RecordingSleep()
    with pytest.raises(ModelProviderError) as info:
        await call_with_retries(
            attempt,
            policy=RetryPolicy(max_retries=5),
            classify=lambda exc: Failure("down", retryable=True),
            label="openai:m",
            retry_allowed=lambda: calls < 2,
            sleep=sleep,
        )
    assert calls == 2
    assert len(sleep.delays) == 1
    assert info.value.message == "openai:m: down (gave up after 2 attempts)"
    assert info.value.__suppress_context__
