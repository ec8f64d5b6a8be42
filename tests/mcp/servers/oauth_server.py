"""An MCP server behind OAuth, with its own authorization server, for the client's tests.

Run as ``python oauth_server.py [--expires-in S] [--legacy-issuer ISSUER]``: it prints ``listening on URL`` (the
MCP endpoint, ``URL`` = ``http://127.0.0.1:PORT/mcp``) once it serves. The resource and
the authorization server enforce what the specs say a client must do, and refuse
anything else with the OAuth error a real one gives:

- the MCP endpoint answers 401 with ``WWW-Authenticate`` (``resource_metadata``,
  ``scope``) without a valid, unexpired token; the tool ``admin`` needs the scope
  ``admin`` and answers 403 ``insufficient_scope`` (step-up) without it;
- RFC 9728 metadata at ``/.well-known/oauth-protected-resource/mcp``, RFC 8414 metadata
  at ``/.well-known/oauth-authorization-server``;
- ``/register`` (RFC 7591): loopback ``http`` redirect URIs only; a public client;
- ``/authorize``: a registered client, a registered redirect URI (any port on loopback,
  RFC 8252), ``response_type=code``, ``state``, PKCE ``S256``, ``resource`` = the MCP
  URL; it approves at once (302 to the redirect URI with ``code`` and ``state``);
- ``/token``: a code once, within 60 s, with the same client, redirect URI and resource,
  and a ``code_verifier`` that hashes to the challenge; a refresh token once (rotated);
  access tokens expire after ``--expires-in`` seconds; the pre-registered confidential
  client ``pre`` authenticates with HTTP basic (``PRE_SECRET``).

``/stats`` (JSON) counts each grant and each 401 of the MCP endpoint, and lists every secret it issued (codes, tokens), so
a test can look for them where they must not be; ``/revoke`` drops every access token.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import secrets
import sys
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

PRE_SECRET = "pre-registered-client-secret-0123456789"

parser = argparse.ArgumentParser()
parser.add_argument("--expires-in", type=int, default=3600)
parser.add_argument(
    "--legacy-issuer",
    help="serve as a 2025-03-26 server: no protected resource metadata (and none named in "
    "the challenge), and authorization server metadata at the origin naming this issuer "
    "(a path on the origin, or an absolute URL)",
)
options = parser.parse_args()

mcp = MCPServer("oauth-test-server")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@mcp.tool()
def admin() -> str:
    """Needs the admin scope."""
    return "admin done"


inner = mcp.streamable_http_app()
base = ""
clients: dict[str, dict[str, Any]] = {"pre": {"redirect_uris": [], "secret": PRE_SECRET}}
codes: dict[str, dict[str, Any]] = {}
access: dict[str, dict[str, Any]] = {}
refresh: dict[str, dict[str, Any]] = {}
stats: dict[str, Any] = {
    "authorize": 0, "code": 0, "refresh": 0, "register": 0, "unauthorized": 0, "issued": [],
}  # fmt: skip


def error(status: int, code: str, description: str) -> JSONResponse:
    return JSONResponse({"error": code, "error_description": description}, status_code=status)


def loopback_match(given: str, registered: list[str]) -> bool:
    """RFC 8252 section 7.3: on loopback, any port matches."""
    parts = urlsplit(given)
    for uri in registered:
        other = urlsplit(uri)
        if parts.hostname in ("127.0.0.1", "localhost") and (
            parts.scheme,
            parts.hostname,
            parts.path,
        ) == (other.scheme, other.hostname, other.path):
            return True
        if given == uri:
            return True
    return False


def issue(client_id: str, scope: str) -> dict[str, Any]:
    token, renew = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    access[token] = {"scope": scope, "expires": time.time() + options.expires_in}
    refresh[renew] = {"client_id": client_id, "scope": scope}
    stats["issued"] += [token, renew]
    return {
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": options.expires_in,
        "refresh_token": renew,
        "scope": scope,
    }


async def authorize(request: Request) -> Response:
    q = request.query_params
    client = clients.get(q.get("client_id", ""))
    if client is None:
        return error(400, "invalid_client", "unknown client")
    redirect = q.get("redirect_uri", "")
    if not loopback_match(redirect, client["redirect_uris"]) and client["redirect_uris"]:
        return error(400, "invalid_request", "redirect_uri is not registered")
    if q.get("response_type") != "code" or not q.get("state"):
        return error(400, "invalid_request", "response_type=code and state are required")
    if q.get("code_challenge_method") != "S256" or len(q.get("code_challenge", "")) < 43:
        return error(400, "invalid_request", "PKCE with S256 is required")
    legacy_without = options.legacy_issuer and "resource" not in q  # 2025-03-26 predates it
    if q.get("resource") != f"{base}/mcp" and not legacy_without:
        return error(400, "invalid_target", "resource must be the MCP server's URL")
    stats["authorize"] += 1
    code = secrets.token_urlsafe(24)
    stats["issued"].append(code)
    codes[code] = {
        "client_id": q["client_id"],
        "redirect_uri": redirect,
        "challenge": q["code_challenge"],
        "resource": q.get("resource"),
        "scope": q.get("scope", ""),
        "expires": time.time() + 60,
    }
    return RedirectResponse(f"{redirect}?{urlencode({'code': code, 'state': q['state']})}", 302)


async def token(request: Request) -> Response:
    form = await request.form()
    client_id = str(form.get("client_id", ""))
    basic = request.headers.get("authorization", "")
    if basic.lower().startswith("basic "):
        user, _, password = base64.b64decode(basic[6:]).decode().partition(":")
        if clients.get(user, {}).get("secret") != password:
            return error(401, "invalid_client", "bad client credentials")
        client_id = user
    elif clients.get(client_id, {}).get("secret"):
        return error(401, "invalid_client", "this client must authenticate")
    grant = form.get("grant_type")
    if grant == "authorization_code":
        entry = codes.pop(str(form.get("code", "")), None)
        if entry is None or entry["expires"] < time.time():
            return error(400, "invalid_grant", "unknown, used or expired code")
        if entry["client_id"] != client_id or entry["redirect_uri"] != form.get("redirect_uri"):
            return error(400, "invalid_grant", "client or redirect_uri differs")
        if entry["resource"] != form.get("resource"):
            return error(400, "invalid_target", "resource differs from the authorization's")
        verifier = str(form.get("code_verifier", ""))
        digest = hashlib.sha256(verifier.encode()).digest()
        if base64.urlsafe_b64encode(digest).decode().rstrip("=") != entry["challenge"]:
            return error(400, "invalid_grant", "code_verifier does not match")
        stats["code"] += 1
        return JSONResponse(issue(client_id, entry["scope"]), headers={"Cache-Control": "no-store"})
    if grant == "refresh_token":
        entry = refresh.pop(str(form.get("refresh_token", "")), None)
        if entry is None or entry["client_id"] != client_id:
            return error(400, "invalid_grant", "unknown or used refresh token")
        stats["refresh"] += 1
        return JSONResponse(issue(client_id, entry["scope"]), headers={"Cache-Control": "no-store"})
    return error(400, "unsupported_grant_type", f"{grant!r} is not supported")


async def register(request: Request) -> Response:
    body = await request.json()
    uris = body.get("redirect_uris") or []
    if not uris or not all(urlsplit(u).hostname in ("127.0.0.1", "localhost") for u in uris):
        return error(400, "invalid_redirect_uri", "loopback redirect URIs only")
    client_id = secrets.token_urlsafe(12)
    clients[client_id] = {"redirect_uris": uris, "secret": None}
    stats["register"] += 1
    return JSONResponse(
        {**body, "client_id": client_id, "token_endpoint_auth_method": "none"}, status_code=201
    )


def challenge(status: int, scope: str, extra: str = "") -> Response:
    header = (
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp", '
        f'scope="{scope}"{extra}'
    )
    if options.legacy_issuer:
        header = f'Bearer scope="{scope}"{extra}'

    return Response(status_code=status, headers={"WWW-Authenticate": header})


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        await inner(scope, receive, send)
        return
    request = Request(scope, receive)
    path = scope["path"]
    response: Response | None = None
    if path.startswith("/.well-known/oauth-protected-resource") and options.legacy_issuer:
        response = error(404, "not_found", "no protected resource metadata (2025-03-26)")
    elif path == "/.well-known/oauth-protected-resource/mcp":
        response = JSONResponse(
            {
                "resource": f"{base}/mcp",
                "authorization_servers": [base],
                "scopes_supported": ["read"],
            }
        )
    elif path == "/.well-known/oauth-authorization-server":
        issuer = options.legacy_issuer or base
        if issuer.startswith("/"):
            issuer = base + issuer
        response = JSONResponse({
            "issuer": issuer, "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token", "registration_endpoint": f"{base}/register",
            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
            "scopes_supported": ["read", "admin"],
        })  # fmt: skip
    elif path == "/authorize":
        response = await authorize(request)
    elif path == "/token":
        response = await token(request)
    elif path == "/register":
        response = await register(request)
    elif path == "/stats":
        response = JSONResponse(stats)
    elif path == "/revoke":
        access.clear()
        response = JSONResponse({})
    elif path == "/mcp":
        bearer = request.headers.get("authorization", "")
        grant = access.get(bearer[7:]) if bearer.startswith("Bearer ") else None
        if grant is None or grant["expires"] < time.time():
            stats["unauthorized"] += 1
            response = challenge(401, "read")
        elif request.method == "POST":
            body = await request.body()
            try:
                message = json.loads(body)
            except ValueError:
                message = {}
            called = isinstance(message, dict) and message.get("method") == "tools/call"
            admin = called and message.get("params", {}).get("name") == "admin"
            if admin and "admin" not in grant["scope"].split():
                response = challenge(403, "read admin", ', error="insufficient_scope"')
            if response is None:
                sent = False

                async def replay() -> Any:
                    nonlocal sent
                    if sent:
                        return await receive()
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}

                await inner(scope, replay, send)
                return
    if response is None:
        await inner(scope, receive, send)
        return
    await response(scope, receive, send)


class Announce(uvicorn.Server):
    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        global base
        port = self.servers[0].sockets[0].getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        print(f"listening on {base}/mcp", flush=True)


config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
Announce(config).run()
sys.exit(0)
