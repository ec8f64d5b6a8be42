"""Whatever an identity provider answers (it may be broken or hostile), enterprise-managed
authorization reads it without an unexpected exception: an ID token it cannot use, an
error in words that are printable and bounded, never a secret echoed (hypothesis at the
seam: the answer's JSON object, and the ID token's text)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.auth import OAuthFlowError

from cleveragents.mcp import IdentityProviderConfig, TokenStore
from cleveragents.mcp._enterprise import IdentityProvider, _claims, _Refused

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip


class Owner:
    failure: str | None = None


def provider(tmp_path: Path) -> IdentityProvider:
    config = IdentityProviderConfig(client_id="c", issuer="https://idp.example")
    return IdentityProvider(Owner(), config, TokenStore(tmp_path), "s", "https://s/mcp")  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_claims_or_a_value_error(text: str) -> None:
    try:
        claims = _claims(text)
    except ValueError:
        return
    assert isinstance(claims, dict)


@settings(max_examples=200, deadline=None)
@given(st.integers(100, 599), st.dictionaries(st.text(max_size=20), JSON, max_size=6) | st.none())
def test_a_refusal_is_told_in_bounded_printable_words(status: int, answer: Any) -> None:
    words = str(_Refused("the token exchange at the identity provider", status, answer))
    assert words.isprintable()
    assert len(words) < 400
    assert f"HTTP {status}" in words


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.dictionaries(st.sampled_from(["id_token", "refresh_token", "x"]), JSON, max_size=3))
def test_an_answer_without_a_usable_id_token_fails_in_words(
    tmp_path: Path, answer: dict[str, Any]
) -> None:
    with pytest.raises(OAuthFlowError) as failed:
        provider(tmp_path)._keep(answer, "nonce")
    assert "identity provider" in str(failed.value)


def test_an_id_token_is_kept_only_when_its_claims_hold(tmp_path: Path) -> None:
    now = int(time.time())
    good = {"iss": "https://idp.example", "aud": "c", "exp": now + 600, "nonce": "n"}
    for change, problem in [
        ({"iss": "https://evil.example"}, "another issuer"),
        ({"aud": ["other"]}, "not for this client"),
        ({"exp": now - 1}, "has expired"),
        ({"nonce": "m"}, "nonce"),
    ]:
        token = jwt.encode({**good, **change}, "k" * 32, algorithm="HS256")
        with pytest.raises(OAuthFlowError, match=problem):
            provider(tmp_path)._keep({"id_token": token}, "n")
    token = jwt.encode(good, "k" * 32, algorithm="HS256")
    assert provider(tmp_path)._keep({"id_token": token, "refresh_token": "r"}, "n") == token
    kept = TokenStore(tmp_path).load("s", "https://s/mcp")["idp"]
    assert (kept["id_token"], kept["refresh_token"]) == (token, "r")
