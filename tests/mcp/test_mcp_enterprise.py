"""Enterprise-managed authorization (SEP-990, ``oauth.grant = identity_assertion``)
against the loopback identity provider and ID-JAG-taking MCP server
(``servers/enterprise_server.py``), which enforce OpenID Connect, RFC 8693 and RFC 7523
as the extension says: the sign-in at the identity provider through the loopback
callback, the exchange, the jwt-bearer grant; what is kept and reused (the access
token, the ID token, its refresh); an ID token from a file; each refusal in words.

The authorization server lists an ``authorization_endpoint`` (one that refuses every
request): the SDK's metadata model needs one, though RFC 8414 lets a server that takes
no code grant leave it out (docs/mcp.md, "Not supported yet")."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from cleveragents.mcp import McpServer, McpServerConfig, OAuthConfig, TokenStore
from kit.enterprise import (
    IDP_CLIENT_ID,
    IDP_SECRET,
    MCP_CLIENT_ID,
    MCP_SECRET,
    EnterpriseServer,
    enterprise_server,
)
from kit.mcp import base_env
from kit.oauth import Browser
from kit.wait import WAIT_S, wait_for


def fake(*args: str) -> contextlib.AbstractAsyncContextManager[EnterpriseServer]:
    return enterprise_server("--authorization-endpoint", *args)


def oauth(idp: str, **idp_fields: Any) -> OAuthConfig:
    return OAuthConfig(
        grant="identity_assertion", client_id=MCP_CLIENT_ID, client_secret=MCP_SECRET,
        idp={"client_id": IDP_CLIENT_ID, "client_secret": IDP_SECRET, "issuer": idp,
             **idp_fields},
    )  # fmt: skip


@contextlib.asynccontextmanager
async def connected(
    url: str, state: Path, browser: Browser, auth: OAuthConfig
) -> AsyncIterator[McpServer]:
    config = McpServerConfig("corp", url=url, startup_timeout_s=WAIT_S, oauth=auth)
    server = McpServer(
        config, scope="daemon", log_dir=state / "mcp", base_env=base_env(),
        tokens=TokenStore(state), on_authorize=browser,
    )  # fmt: skip
    server.start()
    try:
        yield server
    finally:
        await server.stop()


async def settled(server: McpServer) -> str:
    await wait_for(lambda: server.status in ("ready", "failed"), interval=0.05)
    return server.status


async def test_a_sign_in_at_the_identity_provider_reaches_the_server_without_consent(
    tmp_path: Path,
) -> None:
    browser = Browser()
    async with fake() as web:
        async with connected(web.url, tmp_path, browser, oauth(web.idp)) as server:
            assert await settled(server) == "ready", server.error
            assert await server.call_tool("add", {"a": 2, "b": 3}) == {"result": 5}
        (url,) = browser.urls
        assert url.startswith(f"{web.idp}/authorize?")
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
        assert query["client_id"] == IDP_CLIENT_ID
        assert set(query["scope"].split()) == {"openid", "offline_access"}
        assert query["code_challenge_method"] == "S256"
        assert query["nonce"]
        stats = web.get("/stats")
        assert [stats[k] for k in ("authorize", "code", "exchange", "jwt_bearer")] == [1, 1, 1, 1]
        assert stats["refused"] == []
    kept = json.loads((tmp_path / "mcp-auth" / "corp.json").read_text())
    assert kept["idp"]["issuer"] == web.idp
    assert MCP_SECRET not in json.dumps(kept)
    assert IDP_SECRET not in json.dumps(kept)


async def test_what_is_kept_is_used_again_and_a_new_id_jag_replaces_a_dead_token(
    tmp_path: Path,
) -> None:
    async with fake() as web:
        first = Browser()
        async with connected(web.url, tmp_path, first, oauth(web.idp)) as server:
            assert await settled(server) == "ready", server.error
        again = Browser()
        async with connected(web.url, tmp_path, again, oauth(web.idp)) as server:
            assert await settled(server) == "ready", server.error
            stats = web.get("/stats")
            assert (stats["exchange"], stats["jwt_bearer"]) == (1, 1)  # the token, kept
            web.get("/revoke")
            assert await server.call_tool("add", {"a": 1, "b": 1}) == {"result": 2}
        assert again.urls == []  # the kept ID token was exchanged again: no browser
        stats = web.get("/stats")
        assert [stats[k] for k in ("authorize", "exchange", "jwt_bearer")] == [1, 2, 2]


async def test_an_id_token_near_its_expiry_is_refreshed_at_the_identity_provider(
    tmp_path: Path,
) -> None:
    browser = Browser()
    async with (
        fake("--id-token-expires-in", "30") as web,
        connected(web.url, tmp_path, browser, oauth(web.idp)) as server,
    ):
        assert await settled(server) == "ready", server.error
        web.get("/revoke")
        assert await server.call_tool("add", {"a": 4, "b": 4}) == {"result": 8}
        stats = web.get("/stats")
        assert [stats[k] for k in ("authorize", "refresh", "exchange")] == [1, 1, 2]
        assert len(browser.urls) == 1


def signing_key(tmp_path: Path) -> tuple[ec.EllipticCurvePrivateKey, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = tmp_path / "idp-key.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return key, pem


def id_token(key: ec.EllipticCurvePrivateKey, issuer: str, lifetime: float) -> str:
    now = int(time.time())
    claims = {"iss": issuer, "sub": "demo-user", "aud": IDP_CLIENT_ID, "iat": now - 5,
              "exp": int(now + lifetime)}  # fmt: skip
    return jwt.encode(claims, key, algorithm="ES256")


async def test_an_id_token_from_a_file_is_exchanged_without_a_browser(tmp_path: Path) -> None:
    key, pem = signing_key(tmp_path)
    token_file = tmp_path / "id-token"
    browser = Browser()
    async with fake("--signing-key", str(pem)) as web:
        token_file.write_text(id_token(key, web.idp, 600) + "\n")
        auth = oauth(web.idp, id_token_file=str(token_file))
        async with connected(web.url, tmp_path / "state", browser, auth) as server:
            assert await settled(server) == "ready", server.error
            assert await server.call_tool("add", {"a": 1, "b": 2}) == {"result": 3}
        assert browser.urls == []
        assert web.get("/stats")["exchange"] == 1
        # An expired one says so, and when.
        token_file.write_text(id_token(key, web.idp, -60))
        async with connected(web.url, tmp_path / "state2", browser, auth) as server:
            assert await settled(server) == "failed"
            assert "oauth.idp.idTokenFile" in (server.error or "")
            assert "expired at" in (server.error or "")
        # One the identity provider did not sign is refused there, in its words.
        token_file.write_text(id_token(ec.generate_private_key(ec.SECP256R1()), web.idp, 600))
        async with connected(web.url, tmp_path / "state3", browser, auth) as server:
            assert await settled(server) == "failed"
            error = server.error or ""
            assert "token exchange at the identity provider refused it" in error
            assert "invalid_grant" in error
        assert browser.urls == []


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"client_secret": "wrong-secret"}, "invalid_client"),
        (
            {"issuer": "http://127.0.0.1:9/"},
            "authorization failed: cannot reach http://127.0.0.1:9/",
        ),
    ],
)
async def test_a_refusal_by_the_servers_authorization_server_fails_it_in_words(
    tmp_path: Path, change: dict[str, str], words: str
) -> None:
    async with fake() as web:
        auth = oauth(web.idp)
        auth = OAuthConfig(
            grant=auth.grant, client_id=auth.client_id,
            client_secret=change.get("client_secret", auth.client_secret),
            issuer=change.get("issuer"), idp=auth.idp,
        )  # fmt: skip
        async with connected(web.url, tmp_path, Browser(), auth) as server:
            assert await settled(server) == "failed"
            error = server.error or ""
            assert words in error
            assert "wrong-secret" not in error


async def test_a_pinned_issuer_signs_in_as_a_discovered_one_does(tmp_path: Path) -> None:
    browser = Browser()
    async with fake() as web:
        auth = oauth(web.idp)
        auth = OAuthConfig(
            grant=auth.grant, client_id=MCP_CLIENT_ID, client_secret=MCP_SECRET,
            issuer=web.base, idp=auth.idp,
        )  # fmt: skip
        async with connected(web.url, tmp_path, browser, auth) as server:
            assert await settled(server) == "ready", server.error
        assert web.get("/stats")["jwt_bearer"] == 1
