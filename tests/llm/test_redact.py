"""``_redact``: keys and their fragments, URL credentials, and the HTTP stack's logs."""

from __future__ import annotations

import logging
import time

import pytest

from cleveragents.llm._redact import (
    MIN_FRAGMENT,
    REDACTED,
    Redactor,
    guard_logs,
    remember,
    scrub_urls,
    url_secrets,
)
from cleveragents.llm._retry import _sanitize

KEY = "pat-ca7Q2mZr9LwX4vN8bT1kHd6xyz"


def fragments(secret: str) -> set[str]:
    """Every run of ``MIN_FRAGMENT`` characters of ``secret``, lower-cased."""
    low = secret.lower()
    return {low[i : i + MIN_FRAGMENT] for i in range(len(low) - MIN_FRAGMENT + 1)}


def leaks(text: str, secret: str = KEY) -> set[str]:
    low = text.lower()
    return {f for f in fragments(secret) if f in low}


@pytest.mark.parametrize(
    "echo",
    [
        KEY,
        "pat-ca...6xyz",
        "pat-ca…6xyz",
        "pat-ca****************6xyz",
        KEY[:14],
        KEY[-10:],
        KEY[9:15],
        KEY.upper(),
        f"Bearer:{KEY}.",
    ],
)
def test_the_key_and_every_word_sharing_six_characters_with_it_are_cut_whole(echo: str) -> None:
    text = f"Incorrect API key provided: {echo} (see the dashboard)"
    assert Redactor.of([KEY])(text) == f"Incorrect API key provided: {REDACTED} (see the dashboard)"


def test_a_fragment_shorter_than_six_characters_is_not_recognised() -> None:
    assert Redactor.of([KEY])(f"ends in {KEY[-5:]}") == f"ends in {KEY[-5:]}"


def test_text_without_a_fragment_of_the_key_is_left_as_it_was() -> None:
    text = "The model `gpt-nope` does not exist or you do not have access to it."
    assert Redactor.of([KEY])(text) == text


def test_key_shapes_are_cut_even_when_the_key_is_not_known() -> None:
    assert Redactor.of([])("bad header sk-live-abcdefgh1234") == f"bad header {REDACTED}"


def test_a_short_secret_is_cut_where_it_appears_whole() -> None:
    assert Redactor.of(["abc"])("x abc y") == f"x {REDACTED} y"


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        ("POST http://user:pw@127.0.0.1:8/v1/x", f"POST http://{REDACTED}@127.0.0.1:8/v1/x"),
        ("GET https://h/v1/?token=abc&x=1 ok", f"GET https://h/v1/?{REDACTED} ok"),
        ("target b'/v1/messages?key=abc'", f"target b'/v1/messages?{REDACTED}'"),
        ("http://u:p@h?t=s", f"http://{REDACTED}@h?{REDACTED}"),
        ("see https://example.com/docs for more", "see https://example.com/docs for more"),
    ],
)
def test_urls_lose_their_userinfo_and_query_string(text: str, clean: str) -> None:
    assert scrub_urls(text) == clean


def test_a_base_urls_password_and_long_query_values_count_as_secrets() -> None:
    url = "http://user:hunter2pw@h:1/v1/?token=TOKSECRET&v=1"
    assert url_secrets(url) == ("hunter2pw", "TOKSECRET")
    assert url_secrets("http://localhost:11434/v1") == ()
    assert url_secrets(None) == ()


def test_a_huge_error_body_is_bounded_before_it_is_cut_and_ends_short() -> None:
    body = ("x " * 5_000_000) + KEY
    text = _sanitize(f"{KEY[:14]} {body}", [KEY])
    assert len(text) <= 200
    assert not leaks(text)


@pytest.mark.parametrize(
    "hostile",
    ["a-" * 100_000, "/" * 200_000, "?" * 200_000, "a://" * 50_000, "/a?" * 60_000, "x" * 200_000],
)
def test_hostile_text_is_cut_in_linear_time(hostile: str) -> None:
    redact = Redactor.of([KEY])
    started = time.perf_counter()
    redact(hostile)
    # Quadratic behaviour on 200,000 characters takes minutes; linear takes milliseconds.
    assert time.perf_counter() - started < 2.0


def test_the_http_stacks_log_records_lose_known_keys_userinfo_and_queries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard_logs()
    remember([KEY])
    caplog.set_level(logging.DEBUG)
    logging.getLogger("httpcore2.http11").debug(
        "send_request_headers.failed exception=%r",
        ValueError(f"Illegal header value b'Bearer {KEY}\\r'"),
    )
    logging.getLogger("httpx2").info("HTTP Request: POST %s", "http://u:hunter2pw@h/v1/?t=SECRET")
    logging.getLogger("openai._base_client").debug("request_id: %s", "pat-ca...6xyz")
    assert len(caplog.records) == 3
    assert not leaks(caplog.text)
    assert "hunter2pw" not in caplog.text
    assert "SECRET" not in caplog.text
    assert "HTTP Request: POST http://" in caplog.text


def test_a_traceback_logged_by_the_http_stack_loses_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard_logs()
    remember([KEY])
    caplog.set_level(logging.DEBUG)
    try:
        raise RuntimeError(f"header Bearer {KEY}")
    except RuntimeError:
        logging.getLogger("anthropic._base_client").exception("request failed")
    assert "RuntimeError" in caplog.text
    assert not leaks(caplog.text)


def test_a_record_whose_arguments_do_not_format_does_not_print_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard_logs()
    caplog.set_level(logging.DEBUG)
    logging.getLogger("httpx2").info("two %s %s", KEY)
    assert not leaks(caplog.text)
    assert "did not format" in caplog.text


def test_loggers_the_stack_made_before_the_guard_are_guarded_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    late = logging.getLogger("openai.resources.some_new_module")
    guard_logs()
    remember([KEY])
    caplog.set_level(logging.DEBUG)
    late.debug("echo %s", KEY)
    assert caplog.records
    assert not leaks(caplog.text)
