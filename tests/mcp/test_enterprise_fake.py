"""The enterprise fake (``servers/enterprise_server.py``, SEP-990) enforces what a real
IdP and an ID-JAG-taking authorization server enforce: driven here with plain urllib
and tokens signed by hand, so that a client test passing against it means something.

The fake signs with a key this module made (``--signing-key``), so the tests can forge
what a broken or hostile IdP would sign and see the authorization server refuse it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import jwt
import pytest
import pytest_asyncio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.enterprise import (
    IDP_CLIENT_ID,
    IDP_SECRET,
    MCP_CLIENT_ID,
    MCP_SECRET,
    EnterpriseServer,
    enterprise_server,
)

# One server for the module (each start costs the SDK's import time), on one worker.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("enterprise")]

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
CALLBACK = "http://127.0.0.1:43123/callback"
KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = ec.generate_private_key(ec.SECP256R1())


# HTTP, plainly


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any = field(default=None)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def call(
    url: str,
    form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
) -> Answer:
    if form is not None:
        data = urlencode(form).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with OPENER.open(request, timeout=10) as answer:
            status, got, raw = answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        status, got, raw = error.code, dict(error.headers), error.read()
    lower = {k.lower(): v for k, v in got.items()}
    is_json = lower.get("content-type", "").startswith("application/json") and raw
    body = json.loads(raw) if is_json else raw
    return Answer(status, lower, body)


def basic(client_id: str, secret: str) -> dict[str, str]:
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode()}


IDP_AUTH = basic(IDP_CLIENT_ID, IDP_SECRET)
MCP_AUTH = basic(MCP_CLIENT_ID, MCP_SECRET)


def refused(answer: Answer, code: str, status: int = 400) -> None:
    assert (answer.status, answer.body["error"]) == (status, code), answer.body
    assert answer.headers["cache-control"] == "no-store"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


# The flow's steps


def authorize_query(**changes: str | None) -> dict[str, str]:
    query: dict[str, str | None] = {
        "client_id": IDP_CLIENT_ID, "redirect_uri": CALLBACK, "response_type": "code",
        "scope": "openid email offline_access", "state": "st-1",
        "code_challenge_method": "S256", "code_challenge": pkce()[1], "nonce": "n-1",
    }  # fmt: skip
    query.update(changes)
    return {k: v for k, v in query.items() if v is not None}


def authorize(web: EnterpriseServer, **changes: str | None) -> Answer:
    return call(f"{web.idp}/authorize?{urlencode(authorize_query(**changes))}")


def redirected(answer: Answer) -> dict[str, str]:
    assert answer.status == 302, answer.body
    params = parse_qs(urlsplit(answer.headers["location"]).query)
    return {k: v[0] for k, v in params.items()}


def sign_in(
    web: EnterpriseServer, scope: str = "openid email offline_access", redirect: str = CALLBACK
) -> dict[str, Any]:
    verifier, challenge = pkce()
    code = redirected(authorize(web, scope=scope, code_challenge=challenge, redirect_uri=redirect))[
        "code"
    ]
    form = {
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
        "code_verifier": verifier,
    }  # fmt: skip
    answer = call(f"{web.idp}/token", form, IDP_AUTH)
    assert answer.status == 200, answer.body
    return dict(answer.body)


def exchange_form(web: EnterpriseServer, id_token: str, **changes: str | None) -> dict[str, str]:
    form: dict[str, str | None] = {
        "grant_type": EXCHANGE, "requested_token_type": ID_JAG, "subject_token": id_token,
        "subject_token_type": ID_TOKEN, "audience": web.base, "resource": web.url,
    }  # fmt: skip
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}


def exchange(web: EnterpriseServer, id_token: str, **changes: str | None) -> Answer:
    return call(f"{web.idp}/token", exchange_form(web, id_token, **changes), IDP_AUTH)


def bearer(web: EnterpriseServer, assertion: str, **extra: str) -> Answer:
    form = {"grant_type": JWT_BEARER, "assertion": assertion, **extra}
    return call(f"{web.base}/token", form, MCP_AUTH)


def forge(claims: dict[str, Any], key: Any = KEY, typ: str = "JWT", alg: str = "ES256") -> str:
    return jwt.encode(claims, key, algorithm=alg, headers={"typ": typ})


def id_token_claims(web: EnterpriseServer, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {"iss": web.idp, "sub": "demo-user", "aud": IDP_CLIENT_ID, "iat": now, "exp": now + 60}
    claims.update(changes)
    return claims


def jag_claims(web: EnterpriseServer, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": web.idp, "sub": "demo-user", "aud": web.base, "resource": web.url,
        "client_id": MCP_CLIENT_ID, "jti": secrets.token_urlsafe(12), "iat": now,
        "exp": now + 300,
    }  # fmt: skip
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def mcp_post(
    web: EnterpriseServer, token: str, message: dict[str, Any], session: str = ""
) -> Answer:
    headers = {
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25",
    }  # fmt: skip
    if session:
        headers["Mcp-Session-Id"] = session
    return call(web.url, headers=headers, data=json.dumps(message).encode())


def rpc_result(answer: Answer) -> Any:
    """The JSON-RPC result, whether it came as JSON or as one SSE event."""
    assert answer.status == 200, answer.body
    if isinstance(answer.body, dict):
        return answer.body["result"]
    lines = [line for line in answer.body.decode().splitlines() if line.startswith("data:")]
    return json.loads(lines[-1][5:])["result"]


def add_through_mcp(web: EnterpriseServer, token: str) -> Any:
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "self-test", "version": "0"}},
    }  # fmt: skip
    answer = mcp_post(web, token, init)
    rpc_result(answer)
    session = answer.headers.get("mcp-session-id", "")
    mcp_post(web, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    called = {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
    }  # fmt: skip
    return rpc_result(mcp_post(web, token, called, session))


def stats(web: EnterpriseServer) -> dict[str, Any]:
    return dict(web.get("/stats"))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def web(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EnterpriseServer]:
    path = tmp_path_factory.mktemp("enterprise") / "idp-key.pem"
    path.write_bytes(
        KEY.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    async with enterprise_server("--signing-key", str(path)) as server:
        yield server


def valid_id_token(web: EnterpriseServer) -> str:
    return forge(id_token_claims(web))


def valid_jag(web: EnterpriseServer) -> str:
    answer = exchange(web, valid_id_token(web))
    assert answer.status == 200, answer.body
    return str(answer.body["access_token"])


# The whole flow


async def test_the_whole_flow_signs_in_exchanges_and_calls_the_tool(web: EnterpriseServer) -> None:
    before = stats(web)
    assert call(web.url, data=b"{}").status == 401
    tokens = sign_in(web)
    assert tokens["token_type"] == "Bearer"
    assert tokens["scope"] == "openid email offline_access"
    assert "refresh_token" in tokens
    jwks = call(f"{web.idp}/.well-known/jwks.json").body
    public = jwt.PyJWK(jwks["keys"][0]).key
    claims = jwt.decode(tokens["id_token"], public, algorithms=["ES256"], audience=IDP_CLIENT_ID)
    assert (claims["iss"], claims["sub"], claims["nonce"]) == (web.idp, "demo-user", "n-1")
    assert claims["exp"] - claims["iat"] == 3600
    assert "@" in claims["email"]

    granted = exchange(web, tokens["id_token"], scope="read write")
    assert granted.status == 200, granted.body
    assert granted.body["issued_token_type"] == ID_JAG
    assert (granted.body["token_type"], granted.body["expires_in"]) == ("N_A", 300)
    assert granted.body["scope"] == "read write"
    assertion = granted.body["access_token"]
    assert jwt.get_unverified_header(assertion)["typ"] == "oauth-id-jag+jwt"
    jag = jwt.decode(assertion, public, algorithms=["ES256"], audience=web.base)
    assert (jag["iss"], jag["sub"], jag["resource"]) == (web.idp, "demo-user", web.url)
    assert (jag["client_id"], jag["scope"], jag["exp"] - jag["iat"]) == (
        MCP_CLIENT_ID,
        "read write",
        300,
    )

    answer = bearer(web, assertion)
    assert answer.status == 200, answer.body
    assert (answer.body["token_type"], answer.body["expires_in"]) == ("Bearer", 3600)
    assert answer.body["scope"] == "read write"
    assert "refresh_token" not in answer.body  # SEP-990: a new ID-JAG instead
    assert add_through_mcp(web, answer.body["access_token"])["structuredContent"] == {"result": 5}

    after = stats(web)
    assert call(f"{web.idp}/stats").body == after  # one dict, served by both listeners
    for name in ("authorize", "code", "exchange", "jwt_bearer", "unauthorized"):
        assert after[name] == before[name] + 1, name
    secrets_given = [
        tokens["access_token"], tokens["id_token"], tokens["refresh_token"], assertion,
        answer.body["access_token"], IDP_SECRET, MCP_SECRET,
    ]  # fmt: skip
    assert set(secrets_given) <= set(after["issued"])


async def test_the_metadata_documents_say_what_each_server_takes(web: EnterpriseServer) -> None:
    openid = call(f"{web.idp}/.well-known/openid-configuration").body
    assert openid["issuer"] == web.idp
    assert openid["token_endpoint"] == f"{web.idp}/token"
    assert openid["grant_types_supported"] == ["authorization_code", "refresh_token", EXCHANGE]
    assert openid["code_challenge_methods_supported"] == ["S256"]
    assert openid["scopes_supported"] == ["openid", "email", "offline_access"]
    resource = web.get("/.well-known/oauth-protected-resource/mcp")
    assert resource == {"resource": web.url, "authorization_servers": [web.base]}
    server = web.get("/.well-known/oauth-authorization-server")
    assert server["issuer"] == web.base
    assert server["grant_types_supported"] == [JWT_BEARER]
    assert "authorization_endpoint" not in server
    assert "registration_endpoint" not in server
    answer = call(web.url, data=b"{}", headers={"Authorization": "Bearer made-up"})
    assert answer.status == 401
    assert answer.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{web.base}/.well-known/oauth-protected-resource/mcp"'
    )


# The IdP's sign-in


@pytest.mark.parametrize(
    "redirect",
    [
        "http://127.0.0.1/callback",  # no port
        "http://localhost:4000/callback",
        "https://127.0.0.1:4000/callback",
        "http://127.0.0.1:4000/elsewhere",
        "http://evil.example:4000/callback",
        "http://127.0.0.1:4000/callback#frag",
        None,
    ],
)
async def test_a_bad_redirect_uri_gets_a_page_never_a_redirect(
    web: EnterpriseServer, redirect: str | None
) -> None:
    refused(authorize(web, redirect_uri=redirect), "invalid_request")


async def test_an_unknown_client_gets_a_page_never_a_redirect(web: EnterpriseServer) -> None:
    refused(authorize(web, client_id="someone-else"), "invalid_request")
    refused(authorize(web, client_id=None), "invalid_request")


async def test_any_loopback_port_of_the_callback_is_accepted(web: EnterpriseServer) -> None:
    for port in (1024, 55555):
        redirect = f"http://127.0.0.1:{port}/callback"
        answer = authorize(web, redirect_uri=redirect)
        assert answer.headers["location"].startswith(redirect + "?")
        assert redirected(answer)["state"] == "st-1"


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"scope": "email"}, "invalid_scope"),
        ({"scope": "openid  email"}, "invalid_scope"),
        ({"code_challenge": None}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge_method": None}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
    ],
)
async def test_other_sign_in_errors_go_back_to_the_client_with_the_state(
    web: EnterpriseServer, changes: dict[str, str | None], code: str
) -> None:
    params = redirected(authorize(web, **changes))
    assert (params["error"], params["state"]) == (code, "st-1")
    assert "code" not in params


async def test_a_sign_in_without_state_is_refused(web: EnterpriseServer) -> None:
    params = redirected(authorize(web, state=None))
    assert params["error"] == "invalid_request"
    assert "code" not in params
    assert "state" not in params


async def test_unknown_scopes_are_ignored_and_the_granted_scope_said(web: EnterpriseServer) -> None:
    tokens = sign_in(web, scope="openid profile")
    assert tokens["scope"] == "openid"
    assert "refresh_token" not in tokens  # no offline_access, no refresh token


# The IdP's token endpoint


def code_form(web: EnterpriseServer, **changes: str | None) -> tuple[dict[str, str], str]:
    verifier, challenge = pkce()
    code = redirected(authorize(web, code_challenge=challenge))["code"]
    form: dict[str, str | None] = {
        "grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK,
        "code_verifier": verifier,
    }  # fmt: skip
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}, code


async def test_the_token_endpoint_wants_the_client_authenticated_once(
    web: EnterpriseServer,
) -> None:
    form, _ = code_form(web)
    answer = call(f"{web.idp}/token", form)
    refused(answer, "invalid_client", 401)
    answer = call(f"{web.idp}/token", form, basic(IDP_CLIENT_ID, "wrong"))
    refused(answer, "invalid_client", 401)
    assert answer.headers["www-authenticate"].startswith("Basic")
    refused(call(f"{web.idp}/token", form, {"Authorization": "Basic !!!"}), "invalid_client", 401)
    refused(call(f"{web.idp}/token", form, {"Authorization": "Bearer x"}), "invalid_client", 401)
    both = {**form, "client_id": IDP_CLIENT_ID, "client_secret": IDP_SECRET}
    refused(call(f"{web.idp}/token", both, IDP_AUTH), "invalid_request")
    wrong_post = {**form, "client_id": IDP_CLIENT_ID, "client_secret": "wrong"}
    refused(call(f"{web.idp}/token", wrong_post), "invalid_client", 401)
    # The code was not spent by the refusals: the client still gets its tokens, in the body.
    posted = {**form, "client_id": IDP_CLIENT_ID, "client_secret": IDP_SECRET}
    assert call(f"{web.idp}/token", posted).status == 200


async def test_basic_credentials_are_url_decoded(web: EnterpriseServer) -> None:
    form, _ = code_form(web)
    encoded = "%69dp-client"  # "idp-client", needlessly encoded, as RFC 6749 2.3.1 allows
    pair = base64.b64encode(f"{encoded}:{IDP_SECRET}".encode()).decode()
    answer = call(f"{web.idp}/token", form, {"Authorization": f"Basic {pair}"})
    assert answer.status == 200, answer.body


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"code_verifier": "A" * 43}, "invalid_grant"),
        ({"code_verifier": "short"}, "invalid_request"),
        ({"code_verifier": None}, "invalid_request"),
        ({"redirect_uri": "http://127.0.0.1:1/callback"}, "invalid_grant"),
        ({"redirect_uri": None}, "invalid_request"),
        ({"code": "made-up"}, "invalid_grant"),
        ({"grant_type": "password"}, "unsupported_grant_type"),
        ({"grant_type": None}, "invalid_request"),
    ],
)
async def test_a_code_needs_its_verifier_and_redirect_uri(
    web: EnterpriseServer, changes: dict[str, str | None], code: str
) -> None:
    form, _ = code_form(web, **changes)
    refused(call(f"{web.idp}/token", form, IDP_AUTH), code)


async def test_a_token_request_must_be_a_form_with_each_parameter_once(
    web: EnterpriseServer,
) -> None:
    form, _ = code_form(web)
    as_json = {"Content-Type": "application/json", **IDP_AUTH}
    refused(
        call(f"{web.idp}/token", data=json.dumps(form).encode(), headers=as_json), "invalid_request"
    )
    twice = urlencode(form) + "&code=" + form["code"]
    headers = {"Content-Type": "application/x-www-form-urlencoded", **IDP_AUTH}
    refused(call(f"{web.idp}/token", data=twice.encode(), headers=headers), "invalid_request")
    huge = urlencode({**form, "pad": "x" * 70_000})
    refused(call(f"{web.idp}/token", data=huge.encode(), headers=headers), "invalid_request")


async def test_a_code_works_once_and_its_reuse_revokes_the_refresh_token(
    web: EnterpriseServer,
) -> None:
    form, _ = code_form(web)
    first = call(f"{web.idp}/token", form, IDP_AUTH)
    assert first.status == 200
    refused(call(f"{web.idp}/token", form, IDP_AUTH), "invalid_grant")
    renew = {"grant_type": "refresh_token", "refresh_token": first.body["refresh_token"]}
    refused(call(f"{web.idp}/token", renew, IDP_AUTH), "invalid_grant")


async def test_a_refresh_token_is_rotated_and_a_replay_revokes_the_new_one(
    web: EnterpriseServer,
) -> None:
    tokens = sign_in(web)
    renew = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    before = stats(web)["refresh"]
    second = call(f"{web.idp}/token", renew, IDP_AUTH)
    assert second.status == 200, second.body
    assert second.body["refresh_token"] != tokens["refresh_token"]
    claims = jwt.decode(
        second.body["id_token"], KEY.public_key(), algorithms=["ES256"], audience=IDP_CLIENT_ID
    )
    assert "nonce" not in claims  # OpenID Connect 12.2
    assert stats(web)["refresh"] == before + 1
    wider = call(
        f"{web.idp}/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": second.body["refresh_token"],
            "scope": "openid offline_access admin",
        },
        IDP_AUTH,
    )
    refused(wider, "invalid_scope")  # and that spent the second one
    third = sign_in(web)
    rotate = {"grant_type": "refresh_token", "refresh_token": third["refresh_token"]}
    newer = call(f"{web.idp}/token", rotate, IDP_AUTH).body["refresh_token"]
    refused(call(f"{web.idp}/token", rotate, IDP_AUTH), "invalid_grant")  # the replay
    refused(
        call(f"{web.idp}/token", {"grant_type": "refresh_token", "refresh_token": newer}, IDP_AUTH),
        "invalid_grant",
    )


# The token exchange


async def test_the_audience_may_end_in_one_slash_and_the_id_jag_keeps_it(
    web: EnterpriseServer,
) -> None:
    answer = exchange(web, valid_id_token(web), audience=web.base + "/")
    assert answer.status == 200, answer.body
    assert (
        jwt.decode(answer.body["access_token"], options={"verify_signature": False})["aud"]
        == web.base + "/"
    )
    assert "scope" not in answer.body
    assert bearer(web, answer.body["access_token"]).status == 200


@pytest.mark.parametrize(
    ("changes", "code", "named"),
    [
        ({"requested_token_type": None}, "invalid_request", "requested_token_type"),
        (
            {"requested_token_type": "urn:ietf:params:oauth:token-type:access_token"},
            "invalid_request",
            "requested_token_type",
        ),
        ({"subject_token_type": None}, "invalid_request", "subject_token_type"),
        (
            {"subject_token_type": "urn:ietf:params:oauth:token-type:saml2"},
            "invalid_request",
            "subject_token_type",
        ),
        ({"subject_token": None}, "invalid_request", "subject_token"),
        ({"audience": None}, "invalid_request", "audience"),
        ({"resource": None}, "invalid_request", "resource"),
        ({"actor_token": "x", "actor_token_type": ID_TOKEN}, "invalid_request", "actor_token"),
        ({"audience": "http://127.0.0.1:1"}, "invalid_target", "audience"),
        ({"audience": "AUDIENCE//"}, "invalid_target", "audience"),
        ({"resource": "http://127.0.0.1:1/mcp"}, "invalid_target", "resource"),
        ({"resource": "RESOURCE/"}, "invalid_target", "resource"),
        ({"scope": "read\x01"}, "invalid_scope", "scope"),
    ],
)
async def test_a_token_exchange_names_the_parameter_it_refuses(
    web: EnterpriseServer, changes: dict[str, str | None], code: str, named: str
) -> None:
    for key, value in changes.items():
        if value is not None:
            changes[key] = value.replace("AUDIENCE", web.base).replace("RESOURCE", web.url)
    before = len(stats(web)["refused"])
    answer = exchange(web, valid_id_token(web), **changes)
    refused(answer, code)
    assert named in answer.body["error_description"]
    assert stats(web)["refused"][before:] == [code]


async def test_an_exchange_needs_the_client_authenticated(web: EnterpriseServer) -> None:
    form = exchange_form(web, valid_id_token(web))
    refused(call(f"{web.idp}/token", form), "invalid_client", 401)
    refused(call(f"{web.idp}/token", form, basic(MCP_CLIENT_ID, MCP_SECRET)), "invalid_client", 401)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def hs256_with_public_key(claims: dict[str, Any]) -> str:
    """The algorithm confusion attack: HMAC keyed with the IdP's public key (PyJWT will
    not sign this, so by hand)."""
    public = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    mac = hmac.new(public, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(mac)}"


def subject_tokens(web: EnterpriseServer) -> dict[str, str]:
    """ID tokens the IdP must not exchange, by why."""
    now = int(time.time())
    return {
        "expired": forge(id_token_claims(web, iat=now - 100, exp=now - 1)),
        "another key": forge(id_token_claims(web), key=OTHER_KEY),
        "another client": forge(id_token_claims(web, aud="someone-else")),
        "another issuer": forge(id_token_claims(web, iss="http://127.0.0.1:1")),
        "no exp": forge({k: v for k, v in id_token_claims(web).items() if k != "exp"}),
        "an ID-JAG": forge(id_token_claims(web), typ="oauth-id-jag+jwt"),
        "HS256 keyed with the public key": hs256_with_public_key(id_token_claims(web)),
        "unsigned": jwt.encode(id_token_claims(web), "", algorithm="none"),
        "not a JWT": "just-some-text",
    }


async def test_only_an_unexpired_id_token_signed_by_the_idp_for_the_client_is_exchanged(
    web: EnterpriseServer,
) -> None:
    for why, token in subject_tokens(web).items():
        answer = exchange(web, token)
        assert (answer.status, answer.body["error"]) == (400, "invalid_grant"), why


# The MCP authorization server


async def test_the_authorization_server_takes_only_jwt_bearer_over_basic(
    web: EnterpriseServer,
) -> None:
    assertion = valid_jag(web)
    form = {"grant_type": JWT_BEARER, "assertion": assertion}
    refused(call(f"{web.base}/token", form), "invalid_client", 401)
    refused(call(f"{web.base}/token", form, basic(MCP_CLIENT_ID, "wrong")), "invalid_client", 401)
    refused(call(f"{web.base}/token", form, IDP_AUTH), "invalid_client", 401)
    posted = {**form, "client_id": MCP_CLIENT_ID, "client_secret": MCP_SECRET}
    refused(call(f"{web.base}/token", posted), "invalid_client", 401)  # basic only
    code = {"grant_type": "authorization_code", "code": "c", "redirect_uri": CALLBACK}
    refused(call(f"{web.base}/token", code, MCP_AUTH), "unsupported_grant_type")
    refused(call(f"{web.base}/token", {"grant_type": JWT_BEARER}, MCP_AUTH), "invalid_request")
    assert bearer(web, assertion).status == 200  # not spent by the refusals


def bad_assertions(web: EnterpriseServer) -> dict[str, str]:
    """ID-JAGs the authorization server must refuse, by why."""
    now = int(time.time())
    jag = "oauth-id-jag+jwt"
    return {
        "an ID token": valid_id_token(web),
        "typ JWT": forge(jag_claims(web)),
        "another key": forge(jag_claims(web), key=OTHER_KEY, typ=jag),
        "another audience": forge(jag_claims(web, aud=web.idp), typ=jag),
        "another issuer": forge(jag_claims(web, iss="http://127.0.0.1:1"), typ=jag),
        "another client": forge(jag_claims(web, client_id="someone-else"), typ=jag),
        "another resource": forge(jag_claims(web, resource=web.base + "/other"), typ=jag),
        "no resource": forge(jag_claims(web, resource=None), typ=jag),
        "no jti": forge(jag_claims(web, jti=None), typ=jag),
        "expired past the leeway": forge(jag_claims(web, iat=now - 400, exp=now - 31), typ=jag),
        "issued in the future": forge(jag_claims(web, iat=now + 120, exp=now + 400), typ=jag),
        "unsigned": jwt.encode(jag_claims(web), "", algorithm="none", headers={"typ": jag}),
    }


async def test_the_authorization_server_refuses_any_other_assertion(web: EnterpriseServer) -> None:
    for why, assertion in bad_assertions(web).items():
        answer = bearer(web, assertion)
        assert (answer.status, answer.body["error"]) == (400, "invalid_grant"), why


async def test_an_id_jag_is_taken_once_within_the_leeway_and_trailing_slash(
    web: EnterpriseServer,
) -> None:
    now = int(time.time())
    late = forge(
        jag_claims(web, aud=web.base + "/", iat=now - 320, exp=now - 20), typ="oauth-id-jag+jwt"
    )
    assert bearer(web, late).status == 200
    refused(bearer(web, late), "invalid_grant")  # its jti again
    assertion = valid_jag(web)
    refused(bearer(web, assertion, scope="admin"), "invalid_scope")
    refused(bearer(web, assertion, resource=web.base + "/other"), "invalid_target")
    # As the SDK's provider sends it: client_id and resource in the body besides basic.
    sdk_like = bearer(web, assertion, client_id=MCP_CLIENT_ID, resource=web.url)
    assert sdk_like.status == 200, sdk_like.body
    refused(bearer(web, valid_jag(web), client_id="someone-else"), "invalid_request")


async def test_revoke_drops_every_access_token(web: EnterpriseServer) -> None:
    token = bearer(web, valid_jag(web)).body["access_token"]
    assert add_through_mcp(web, token)["structuredContent"] == {"result": 5}
    web.get("/revoke")
    assert mcp_post(web, token, {"jsonrpc": "2.0", "id": 1, "method": "ping"}).status == 401


async def test_the_options_shorten_lives_and_withhold_refresh_tokens(tmp_path: Path) -> None:
    path = tmp_path / "key.pem"
    path.write_bytes(
        KEY.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    args = (
        "--signing-key",
        str(path),
        "--no-refresh",
        "--expires-in",
        "0",
        "--id-token-expires-in",
        "0",
    )
    async with enterprise_server(*args) as other:
        tokens = sign_in(other)
        assert "refresh_token" not in tokens  # though offline_access was granted
        claims = jwt.decode(tokens["id_token"], options={"verify_signature": False})
        assert claims["exp"] == claims["iat"]
        refused(exchange(other, tokens["id_token"]), "invalid_grant")  # expired at once
        answer = bearer(other, valid_jag(other))
        assert answer.body["expires_in"] == 0
        assert (
            mcp_post(
                other, answer.body["access_token"], {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            ).status
            == 401
        )
        assert other.get("/stats")["unauthorized"] == 1
        assert "authorization_endpoint" not in other.get("/.well-known/oauth-authorization-server")


async def test_a_code_expires_and_an_authorization_endpoint_is_advertised_when_asked() -> None:
    async with enterprise_server("--authorization-endpoint", "--code-expires-in", "0") as other:
        form, _ = code_form(other)
        refused(call(f"{other.idp}/token", form, IDP_AUTH), "invalid_grant")  # expired at once
        metadata = other.get("/.well-known/oauth-authorization-server")
        assert metadata["authorization_endpoint"] == f"{other.base}/authorize"
        query = urlencode(
            {"client_id": MCP_CLIENT_ID, "response_type": "code", "redirect_uri": CALLBACK}
        )
        refused(call(f"{other.base}/authorize?{query}"), "unauthorized_client")


# Hostile bytes


async def test_any_form_is_answered_with_an_oauth_error_never_a_crash(
    web: EnterpriseServer,
) -> None:
    @settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.dictionaries(
            st.sampled_from([
                "grant_type", "assertion", "code", "subject_token", "audience", "resource",
                "client_id", "client_secret", "scope", "code_verifier", "refresh_token",
            ]),
            st.text(max_size=80),
        ),
        st.sampled_from(["", "Basic bWNwLWNsaWVudA==", "Basic " + b64url(b"\xff:\xfe")]),
    )  # fmt: skip
    def any_form(form: dict[str, str], authorization: str) -> None:
        headers = {"Authorization": authorization} if authorization else {}
        for endpoint in (f"{web.idp}/token", f"{web.base}/token"):
            answer = call(endpoint, form, headers)
            assert answer.status in (400, 401), (endpoint, form, answer.body)
            assert answer.body["error"] in (
                "invalid_request", "invalid_client", "invalid_grant", "unsupported_grant_type",
                "invalid_target", "invalid_scope",
            )  # fmt: skip

    any_form()
