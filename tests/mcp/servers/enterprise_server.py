"""An enterprise IdP and an MCP server whose authorization server takes ID-JAGs
(SEP-990, "Enterprise-Managed Authorization"), for the client's tests.

Run as ``python enterprise_server.py [--expires-in S] [--id-token-expires-in S]
[--code-expires-in S] [--no-refresh] [--signing-key PEM]
[--authorization-endpoint]``: two loopback listeners in one process, and once
both serve one line ``listening on MCP_URL IDP_ISSUER``.

Listener 1, the IdP (OpenID Connect, issuer ``http://127.0.0.1:P1``), knows one client,
``idp-client`` (confidential, any loopback port of ``http://127.0.0.1/callback``):

- ``/.well-known/openid-configuration`` and ``/.well-known/jwks.json`` (its ES256 key);
- ``/authorize``: ``response_type=code``, ``state``, ``openid`` in ``scope``, PKCE
  ``S256``; it approves at once, granting the scopes it knows (others are ignored, as
  OpenID Connect Core 5.4 says). A bad client or redirect URI gets a 400 page, anything
  else wrong goes back to the redirect URI as ``error=`` (RFC 6749 4.1.2.1);
- ``/token``, with client authentication for every grant (basic or in the body, never
  both): ``authorization_code`` (the code once, within 60 s, same client and redirect URI,
  the verifier; a second use revokes what the code gave), ``refresh_token`` (single use;
  replaying one revokes its family), and RFC 8693 token exchange of an ID token this IdP
  signed for the authenticating client into an ID-JAG for the MCP authorization server.

Listener 2, the MCP server (``/mcp``, tool ``add``) and its authorization server on one
origin: RFC 9728 and RFC 8414 metadata, and ``/token`` taking only the RFC 7523
jwt-bearer grant from ``mcp-client`` over HTTP basic, with an ID-JAG the IdP signed
(``typ`` ``oauth-id-jag+jwt``, ``aud`` this issuer, ``client_id`` the caller, ``resource``
the MCP URL, unexpired within 30 s, ``jti`` never seen before), and a ``scope``, if asked,
no wider than the ID-JAG's (and a ``resource``, if sent, the MCP URL: RFC 8707). It issues no refresh token: SEP-990 clients get a new ID-JAG.

Token requests must be urlencoded forms of at most 64 KiB with no parameter twice; errors
are RFC 6749 5.2 JSON with ``Cache-Control: no-store``, and a 401 of ``/token`` names ``Basic``.

Both serve ``/stats`` (one dict: each grant counted, the 401s of ``/mcp``, every error
code refused, and every secret issued or configured, so that a test can look for them
where they must not be) and ``/revoke`` (any method: drops every access token). ``--signing-key``
makes the IdP sign with a test's own P-256 key, so that a test can forge what a broken
IdP would sign; without it, a key is made at start. Bad subject tokens are refused with
``invalid_grant``, as the SEP's example and the conformance suite do (RFC 8693 itself
says ``invalid_request``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import hashlib
import hmac
import re
import secrets
import signal
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

IDP_CLIENT_ID = "idp-client"
IDP_SECRET = "idp-client-secret-0123456789"
MCP_CLIENT_ID = "mcp-client"
MCP_SECRET = "mcp-client-secret-0123456789"

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
JAG_TYP = "oauth-id-jag+jwt"
USER = "demo-user"
EMAIL = "demo-user@example.com"
JAG_LIFE_S = 300
IDP_ACCESS_LIFE_S = 3600
LEEWAY_S = 30
FORM_LIMIT = 64 * 1024
PKCE = re.compile(r"[A-Za-z0-9._~-]{43,128}")
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 3.3 NQCHAR

parser = argparse.ArgumentParser()
parser.add_argument("--expires-in", type=int, default=3600, help="MCP access token life (s)")
parser.add_argument("--id-token-expires-in", type=int, default=3600, help="ID token life (s)")
parser.add_argument("--code-expires-in", type=int, default=60, help="authorization code life (s)")
parser.add_argument("--no-refresh", action="store_true", help="no refresh tokens from the IdP")
parser.add_argument("--signing-key", help="PEM file of the IdP's P-256 private key")
parser.add_argument(
    "--authorization-endpoint",
    action="store_true",
    help="the authorization server's metadata names an authorization endpoint (which refuses "
    "every request): RFC 8414 lets a server that takes no code grant leave it out, and the "
    "SDK's metadata model requires it",
)

stats: dict[str, Any] = {
    "authorize": 0, "code": 0, "refresh": 0, "exchange": 0, "jwt_bearer": 0,
    "unauthorized": 0, "refused": [], "issued": [IDP_SECRET, MCP_SECRET],
}  # fmt: skip


class Origins:
    """The two listeners' origins, known once both have their port."""

    idp = ""
    mcp = ""

    @classmethod
    def mcp_url(cls) -> str:
        return f"{cls.mcp}/mcp"


class Refused(Exception):
    """An OAuth error response, raised from deep in a handler."""

    def __init__(self, status: int, code: str, description: str) -> None:
        super().__init__(description)
        self.status, self.code, self.description = status, code, description


def refusal(error: Refused) -> JSONResponse:
    stats["refused"].append(error.code)
    headers = {"Cache-Control": "no-store"}
    if error.status == 401:  # RFC 9110: a 401 names the scheme it wants
        headers["WWW-Authenticate"] = 'Basic realm="token"'
    return JSONResponse(
        {"error": error.code, "error_description": error.description},
        status_code=error.status,
        headers=headers,
    )


def bad(code: str, description: str) -> Refused:
    return Refused(400, code, description)


def granted(body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})


def issue_secret() -> str:
    value = secrets.token_urlsafe(24)
    stats["issued"].append(value)
    return value


def b64url_sha256(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).decode().rstrip("=")


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def scope_list(text: str) -> list[str]:
    words = text.split(" ") if text else []
    if any(not SCOPE_TOKEN.fullmatch(w) for w in words):
        raise bad("invalid_scope", "scope must be scope tokens separated by single spaces")
    return words


# Requests


async def read_form(request: Request) -> dict[str, str]:
    """The form of a token request: urlencoded, bounded, no parameter twice (RFC 6749
    3.2), and an empty value counts as absent (3.1)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if request.method != "POST" or kind != "application/x-www-form-urlencoded":
        raise bad("invalid_request", "POST an application/x-www-form-urlencoded body")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_LIMIT:
            raise bad("invalid_request", "the request body is too large")
    try:
        pairs = parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError):
        raise bad("invalid_request", "the body is not a valid form") from None
    return single_valued(pairs, ("audience", "resource"))


def single_valued(pairs: list[tuple[str, str]], targets: tuple[str, ...] = ()) -> dict[str, str]:
    form: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in pairs:
        if key in seen:
            if key in targets:  # RFC 8693 allows several; this IdP issues for one
                raise bad("invalid_target", f"one {key} at a time")
            raise bad("invalid_request", f"parameter {key} is repeated")
        seen.add(key)
        if value:
            form[key] = value
    return form


def require(form: dict[str, str], name: str) -> str:
    if name not in form:
        raise bad("invalid_request", f"parameter {name} is required")
    return form[name]


def authenticate(
    request: Request, form: dict[str, str], clients: dict[str, str], body_allowed: bool
) -> str:
    """The authenticated client's id (RFC 6749 2.3.1), or ``Refused``."""
    header = request.headers.get("authorization", "")
    in_body = "client_secret" in form
    if header:
        scheme, _, credentials = header.partition(" ")
        if in_body:
            raise bad("invalid_request", "authenticate with one method, not basic and the body")
        if scheme.lower() != "basic":
            raise Refused(401, "invalid_client", "client authentication is HTTP basic")
        try:
            pair = base64.b64decode(credentials.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise Refused(401, "invalid_client", "malformed basic credentials") from None
        raw_id, colon, raw_secret = pair.partition(":")
        client_id, secret = unquote_plus(raw_id), unquote_plus(raw_secret)
        if not colon or not same(clients.get(client_id, "\0"), secret):
            raise Refused(401, "invalid_client", "bad client credentials")
        if form.get("client_id", client_id) != client_id:
            raise bad("invalid_request", "client_id differs from the authenticated client")
        return client_id
    if in_body:
        if not body_allowed:
            raise Refused(401, "invalid_client", "this server takes client_secret_basic only")
        client_id = form.get("client_id", "")
        if not same(clients.get(client_id, "\0"), form["client_secret"]):
            raise Refused(401, "invalid_client", "bad client credentials")
        return client_id
    raise Refused(401, "invalid_client", "client authentication is required")


# The IdP


class IdP:
    """The enterprise IdP's keys and grants."""

    def __init__(
        self, key: ec.EllipticCurvePrivateKey, id_token_life: int, code_life: int, refresh: bool
    ) -> None:
        self.key = key
        der = key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.kid = hashlib.sha256(der).hexdigest()[:16]  # the same for the same key
        self.id_token_life = id_token_life
        self.refresh = refresh
        self.code_life = code_life
        self.codes: dict[str, dict[str, Any]] = {}
        self.spent: dict[str, float] = {}  # used codes, until they would have expired
        self.refresh_tokens: dict[str, dict[str, Any]] = {}
        self.used_refresh: dict[str, str] = {}  # rotated refresh token -> its family
        self.access: dict[str, float] = {}

    def metadata(self) -> dict[str, Any]:
        issuer = Origins.idp
        return {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "jwks_uri": f"{issuer}/.well-known/jwks.json",
            "grant_types_supported": ["authorization_code", "refresh_token", TOKEN_EXCHANGE],
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "scopes_supported": ["openid", "email", "offline_access"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
            "claims_supported": ["iss", "sub", "aud", "iat", "exp", "email", "nonce"],
        }

    def jwks(self) -> dict[str, Any]:
        jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "use": "sig", "alg": "ES256"}]}

    def sign(self, claims: dict[str, Any], typ: str = "JWT") -> str:
        token = jwt.encode(
            claims, self.key, algorithm="ES256", headers={"kid": self.kid, "typ": typ}
        )
        stats["issued"].append(token)
        return token

    def id_token(self, nonce: str | None) -> str:
        now = int(time.time())
        claims = {
            "iss": Origins.idp, "sub": USER, "aud": IDP_CLIENT_ID, "iat": now,
            "exp": now + self.id_token_life, "auth_time": now, "email": EMAIL,
        }  # fmt: skip
        if nonce is not None:
            claims["nonce"] = nonce
        return self.sign(claims)

    def authorize(self, request: Request) -> Response:
        query = single_valued(parse_qsl(request.url.query, keep_blank_values=True))
        if query.get("client_id") != IDP_CLIENT_ID:
            raise bad("invalid_request", "unknown client_id")  # never redirect for this
        redirect = query.get("redirect_uri", "")
        parts = urlsplit(redirect)
        try:
            port = parts.port
        except ValueError:
            port = None
        loopback = (parts.scheme, parts.hostname, parts.path) == ("http", "127.0.0.1", "/callback")
        if not loopback or port is None or parts.fragment or parts.username is not None:
            raise bad("invalid_request", "redirect_uri is not registered for this client")
        state = query.get("state")

        def back(**params: str) -> Response:
            if state is not None:
                params["state"] = state
            joiner = "&" if parts.query else "?"
            return RedirectResponse(f"{redirect}{joiner}{urlencode(params)}", 302)

        def refuse(code: str, description: str) -> Response:
            stats["refused"].append(code)
            return back(error=code, error_description=description)

        if query.get("response_type") != "code":
            return refuse("unsupported_response_type", "response_type must be code")
        if state is None:
            return refuse("invalid_request", "state is required")
        try:
            words = scope_list(query.get("scope", ""))
        except Refused as error:
            return refuse(error.code, error.description)
        if "openid" not in words:
            return refuse("invalid_scope", "scope must contain openid")
        if "code_challenge" not in query:
            return refuse("invalid_request", "code_challenge is required (PKCE)")
        if query.get("code_challenge_method") != "S256":
            return refuse("invalid_request", "code_challenge_method must be S256")
        if not re.fullmatch(r"[A-Za-z0-9_-]{43}", query["code_challenge"]):
            return refuse("invalid_request", "code_challenge is not a base64url SHA-256")
        known = [w for w in words if w in ("openid", "email", "offline_access")]
        now = time.time()
        for old in [c for c, e in self.codes.items() if e["expires"] < now]:
            self.spent[old] = self.codes.pop(old)["expires"]
        for old in [c for c, expires in self.spent.items() if expires < now - 3600]:
            del self.spent[old]
        stats["authorize"] += 1
        code = issue_secret()
        self.codes[code] = {
            "client_id": IDP_CLIENT_ID, "redirect_uri": redirect,
            "challenge": query["code_challenge"], "scope": " ".join(dict.fromkeys(known)),
            "nonce": query.get("nonce"), "expires": now + self.code_life,
        }  # fmt: skip
        return back(code=code)

    def tokens(self, client_id: str, scope: str, nonce: str | None, family: str) -> dict[str, Any]:
        access = issue_secret()
        self.access[access] = time.time() + IDP_ACCESS_LIFE_S
        body: dict[str, Any] = {
            "access_token": access, "token_type": "Bearer", "expires_in": IDP_ACCESS_LIFE_S,
            "id_token": self.id_token(nonce), "scope": scope,
        }  # fmt: skip
        if self.refresh and "offline_access" in scope.split():
            renew = issue_secret()
            self.refresh_tokens[renew] = {"client_id": client_id, "scope": scope, "family": family}
            body["refresh_token"] = renew
        return body

    def revoke_family(self, family: str) -> None:
        for token in [t for t, e in self.refresh_tokens.items() if e["family"] == family]:
            del self.refresh_tokens[token]

    def code_grant(self, client_id: str, form: dict[str, str]) -> dict[str, Any]:
        code = require(form, "code")
        redirect = require(form, "redirect_uri")
        verifier = require(form, "code_verifier")
        if not PKCE.fullmatch(verifier):
            raise bad("invalid_request", "code_verifier must be 43 to 128 unreserved characters")
        entry = self.codes.pop(code, None)
        if entry is None:
            if code in self.spent:  # RFC 6749 4.1.2: revoke what the code gave
                self.revoke_family(code)
            raise bad("invalid_grant", "unknown, used or expired code")
        self.spent[code] = entry["expires"]
        if entry["expires"] <= time.time():
            raise bad("invalid_grant", "unknown, used or expired code")
        if entry["client_id"] != client_id:
            raise bad("invalid_grant", "the code was issued to another client")
        if entry["redirect_uri"] != redirect:
            raise bad("invalid_grant", "redirect_uri differs from the authorization request's")
        if not same(b64url_sha256(verifier), entry["challenge"]):
            raise bad("invalid_grant", "code_verifier does not match the code_challenge")
        stats["code"] += 1
        return self.tokens(client_id, entry["scope"], entry["nonce"], family=code)

    def refresh_grant(self, client_id: str, form: dict[str, str]) -> dict[str, Any]:
        token = require(form, "refresh_token")
        entry = self.refresh_tokens.pop(token, None)
        if entry is None:
            family = self.used_refresh.get(token)
            if family is not None:  # a replayed refresh token: someone else may hold it
                self.revoke_family(family)
            raise bad("invalid_grant", "unknown, used or revoked refresh token")
        self.used_refresh[token] = entry["family"]
        if entry["client_id"] != client_id:
            raise bad("invalid_grant", "the refresh token was issued to another client")
        scope = entry["scope"]
        if "scope" in form:
            asked = scope_list(form["scope"])
            if not set(asked) <= set(scope.split()):
                raise bad("invalid_scope", "scope is wider than the one first granted")
            scope = " ".join(asked)
        stats["refresh"] += 1
        return self.tokens(client_id, scope, None, family=entry["family"])

    def exchange_grant(self, client_id: str, form: dict[str, str]) -> dict[str, Any]:
        """RFC 8693 token exchange of an ID token for an ID-JAG (SEP-990 section 4)."""
        for name, expected in (("requested_token_type", ID_JAG), ("subject_token_type", ID_TOKEN)):
            if require(form, name) != expected:
                raise bad("invalid_request", f"{name} must be {expected}")
        subject = require(form, "subject_token")
        audience = require(form, "audience")
        resource = require(form, "resource")
        if "actor_token" in form or "actor_token_type" in form:
            raise bad("invalid_request", "actor_token is not used for ID-JAGs")
        if audience.removesuffix("/") != Origins.mcp:
            raise bad("invalid_target", "audience is not an authorization server this IdP knows")
        if resource != Origins.mcp_url():
            raise bad("invalid_target", "resource is not an MCP server this IdP knows")
        scope = scope_list(form["scope"]) if "scope" in form else None
        try:
            if jwt.get_unverified_header(subject).get("typ", "JWT") != "JWT":
                raise jwt.InvalidTokenError("not an ID token")
            claims = jwt.decode(
                subject, self.key.public_key(), algorithms=["ES256"], audience=client_id,
                issuer=Origins.idp, options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )  # fmt: skip
        except jwt.InvalidTokenError as error:
            raise bad("invalid_grant", f"subject_token is not a valid ID token: {error}") from None
        stats["exchange"] += 1
        now = int(time.time())
        grant = {
            "iss": Origins.idp, "sub": claims["sub"], "aud": audience, "resource": resource,
            "client_id": MCP_CLIENT_ID, "jti": secrets.token_urlsafe(16), "iat": now,
            "exp": now + JAG_LIFE_S, "email": claims.get("email", EMAIL),
        }  # fmt: skip
        body: dict[str, Any] = {
            "issued_token_type": ID_JAG, "token_type": "N_A", "expires_in": JAG_LIFE_S,
        }  # fmt: skip
        if scope is not None:
            grant["scope"] = body["scope"] = " ".join(scope)
        body["access_token"] = self.sign(grant, typ=JAG_TYP)
        return body

    async def token(self, request: Request) -> Response:
        form = await read_form(request)
        grants: dict[str, Callable[[str, dict[str, str]], dict[str, Any]]] = {
            "authorization_code": self.code_grant,
            "refresh_token": self.refresh_grant,
            TOKEN_EXCHANGE: self.exchange_grant,
        }
        grant = grants.get(require(form, "grant_type"))
        if grant is None:
            raise bad("unsupported_grant_type", "grant_type is not supported by this IdP")
        client_id = authenticate(request, form, {IDP_CLIENT_ID: IDP_SECRET}, body_allowed=True)
        return granted(grant(client_id, form))


# The MCP server and its authorization server


class McpAuthorization:
    """The MCP server's authorization server: ID-JAGs in, access tokens out."""

    def __init__(self, idp: IdP, expires_in: int, authorize: bool) -> None:
        self.idp = idp
        self.expires_in = expires_in
        self.authorize = authorize
        self.access: dict[str, float] = {}
        self.seen: dict[str, float] = {}  # jti -> until when it could still be replayed

    def metadata(self) -> dict[str, Any]:
        metadata = {
            "issuer": Origins.mcp,
            "token_endpoint": f"{Origins.mcp}/token",
            "grant_types_supported": [JWT_BEARER],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        }
        if self.authorize:
            metadata["authorization_endpoint"] = f"{Origins.mcp}/authorize"
            metadata["response_types_supported"] = ["code"]
        return metadata

    def resource_metadata(self) -> dict[str, Any]:
        return {"resource": Origins.mcp_url(), "authorization_servers": [Origins.mcp]}

    async def token(self, request: Request) -> Response:
        form = await read_form(request)
        if require(form, "grant_type") != JWT_BEARER:
            raise bad("unsupported_grant_type", f"only {JWT_BEARER} is supported")
        client_id = authenticate(request, form, {MCP_CLIENT_ID: MCP_SECRET}, body_allowed=False)
        assertion = require(form, "assertion")
        if form.get("resource", Origins.mcp_url()) != Origins.mcp_url():  # RFC 8707
            raise bad("invalid_target", "resource is not this authorization server's")
        try:
            if jwt.get_unverified_header(assertion).get("typ") != JAG_TYP:
                raise jwt.InvalidTokenError(f"typ is not {JAG_TYP}")
            claims = jwt.decode(
                assertion, self.idp.key.public_key(), algorithms=["ES256"],
                audience=[Origins.mcp, f"{Origins.mcp}/"], issuer=Origins.idp, leeway=LEEWAY_S,
                options={"require": ["iss", "sub", "aud", "exp", "iat", "jti"]},
            )  # fmt: skip
        except jwt.InvalidTokenError as error:
            raise bad("invalid_grant", f"assertion is not a valid ID-JAG: {error}") from None
        if claims.get("client_id") != client_id:
            raise bad("invalid_grant", "the ID-JAG was issued to another client")
        if claims.get("resource") != Origins.mcp_url():
            raise bad("invalid_grant", "the ID-JAG is for another resource")
        now = time.time()
        for jti in [j for j, until in self.seen.items() if until < now]:
            del self.seen[jti]
        jti = str(claims["jti"])
        if jti in self.seen:
            raise bad("invalid_grant", "the ID-JAG was already used (jti replayed)")
        allowed = str(claims.get("scope", ""))
        scope = allowed
        if "scope" in form:
            asked = scope_list(form["scope"])
            if not set(asked) <= set(allowed.split()):
                raise bad("invalid_scope", "scope is wider than the ID-JAG grants")
            scope = " ".join(asked)
        self.seen[jti] = float(claims["exp"]) + LEEWAY_S  # spent only when it is taken
        stats["jwt_bearer"] += 1
        token = issue_secret()
        self.access[token] = now + self.expires_in
        return granted(
            {"access_token": token, "token_type": "Bearer", "expires_in": self.expires_in,
             "scope": scope}
        )  # fmt: skip

    def authorized(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        expires = self.access.get(token) if scheme.lower() == "bearer" else None
        return expires is not None and expires > time.time()


# The two listeners


def common(path: str, idp: IdP, mas: McpAuthorization) -> Response | None:
    if path == "/stats":
        return JSONResponse(stats)
    if path == "/revoke":
        idp.access.clear()
        mas.access.clear()
        return JSONResponse({})
    return None


def idp_app(idp: IdP, mas: McpAuthorization) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        path = scope["path"]
        try:
            response = common(path, idp, mas)
            if response is not None:
                pass
            elif path == "/.well-known/openid-configuration":
                response = JSONResponse(idp.metadata())
            elif path == "/.well-known/jwks.json":
                response = JSONResponse(idp.jwks())
            elif path == "/authorize" and request.method == "GET":
                response = idp.authorize(request)
            elif path == "/token":
                response = await idp.token(request)
            else:
                response = JSONResponse({"error": "not_found"}, status_code=404)
        except Refused as error:
            response = refusal(error)
        await response(scope, receive, send)

    return app


def mcp_app(idp: IdP, mas: McpAuthorization, inner: ASGIApp) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)  # the MCP session manager's lifespan
            return
        request = Request(scope, receive)
        path = scope["path"]
        try:
            response = common(path, idp, mas)
            if response is not None:
                pass
            elif path == "/.well-known/oauth-protected-resource/mcp":
                response = JSONResponse(mas.resource_metadata())
            elif path == "/.well-known/oauth-authorization-server":
                response = JSONResponse(mas.metadata())
            elif path == "/token":
                response = await mas.token(request)
            elif path == "/authorize" and mas.authorize:  # no client may use it
                raise bad("unauthorized_client", "this authorization server takes ID-JAGs only")
            elif path == "/mcp":
                if mas.authorized(request):
                    await inner(scope, receive, send)
                    return
                stats["unauthorized"] += 1
                metadata = f"{Origins.mcp}/.well-known/oauth-protected-resource/mcp"
                response = Response(
                    status_code=401,
                    headers={"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'},
                )
            else:
                response = JSONResponse({"error": "not_found"}, status_code=404)
        except Refused as error:
            response = refusal(error)
        await response(scope, receive, send)

    return app


class Listener(uvicorn.Server):
    """A uvicorn server that says when it listens and leaves signals to ``main``."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    def origin(self) -> str:
        return f"http://127.0.0.1:{self.servers[0].sockets[0].getsockname()[1]}"


def load_key(path: str | None) -> ec.EllipticCurvePrivateKey:
    if path is None:
        return ec.generate_private_key(ec.SECP256R1())
    with open(path, "rb") as file:
        key = serialization.load_pem_private_key(file.read(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise SystemExit("--signing-key must be a P-256 private key")
    return key


async def main() -> None:
    options = parser.parse_args()
    idp = IdP(
        load_key(options.signing_key),
        options.id_token_expires_in,
        options.code_expires_in,
        not options.no_refresh,
    )
    mas = McpAuthorization(idp, options.expires_in, options.authorization_endpoint)
    mcp = MCPServer("enterprise-test-server")

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def listener(app: ASGIApp, lifespan: Literal["on", "off"]) -> Listener:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan
        )
        return Listener(config)

    first = listener(idp_app(idp, mas), "off")
    second = listener(mcp_app(idp, mas, mcp.streamable_http_app()), "on")

    def stop() -> None:
        first.should_exit = second.should_exit = True

    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop)
    serving = asyncio.gather(first.serve(), second.serve())
    both_ready: asyncio.Future[Any] = asyncio.gather(first.ready.wait(), second.ready.wait())
    await asyncio.wait([serving, both_ready], return_when=asyncio.FIRST_COMPLETED)
    if serving.done():  # one could not start: say why, no "listening" line
        stop()
        both_ready.cancel()
        await serving
        raise SystemExit("a listener stopped before serving")
    Origins.idp, Origins.mcp = first.origin(), second.origin()
    print(f"listening on {Origins.mcp_url()} {Origins.idp}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())
