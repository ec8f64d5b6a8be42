"""Enterprise-managed authorization (the MCP extension of SEP-990, an entry's ``oauth``
with ``grant: identity_assertion``): the person's ID token from the enterprise identity
provider is exchanged there (RFC 8693 token exchange) for an Identity Assertion JWT
Authorization Grant (ID-JAG), which the MCP server's authorization server takes for an
access token (RFC 7523 jwt-bearer grant). No consent screen per server: the identity
provider's policy decides.

The SDK's :class:`IdentityAssertionOAuthProvider` presents the ID-JAG (leg 2); this
module gives it what it leaves to the caller:

- the authorization server: pinned by the entry's ``issuer``, else the first one the
  server's protected resource metadata names (RFC 9728, its ``resource`` checked), as
  the other grants discover it; and how the client authenticates there, from its
  metadata (``client_secret_basic`` unless only ``client_secret_post`` is listed);
- the ID token: from ``idp.id_token_file`` (a single sign-on tool's), else kept from an
  earlier sign-in while it is fresh, else refreshed with the identity provider's refresh
  token, else a sign-in at the identity provider in the browser (OpenID Connect,
  authorization code with PKCE, ``state`` and ``nonce``), through the same loopback
  callback and ``needsAuth`` status as the authorization code grant;
- the token exchange (leg 1), its answer checked.

ID tokens, ID-JAGs and secrets are never logged, nor put in an error: a failure says
which step failed and the identity provider's error code and words (bounded).

Imports the SDK: loaded only through ``_transport``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import anyio
import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    issuers_match,
)
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

from ._config import IdentityProviderConfig, McpServerConfig
from ._tokens import TokenStore

if TYPE_CHECKING:
    from ._oauth import Authorizer, StoredTokens

logger = logging.getLogger("cleveragents.mcp")

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
MAX_ANSWER_BYTES = 256 * 1024
"""The most an identity provider's answer may hold."""
ID_TOKEN_MAX_BYTES = 64 * 1024
ID_TOKEN_MARGIN_S = 60.0
"""A kept ID token this close to its expiry is not exchanged (the exchange could fail)."""
HTTP_TIMEOUT_S = 30.0


class EnterpriseAuth(httpx2.Auth):
    """The ``httpx2.Auth`` of an ``identity_assertion`` entry: finds the authorization
    server on the first 401 (or 403), then hands every request to the SDK's provider."""

    requires_response_body = True

    def __init__(self, owner: Authorizer, config: McpServerConfig, storage: StoredTokens) -> None:
        oauth = config.oauth
        assert config.url is not None
        assert oauth is not None
        assert oauth.idp is not None
        assert oauth.client_id is not None
        assert oauth.client_secret is not None
        self._owner = owner
        self._config = config
        self._url = config.url
        self._storage = storage
        self._client_id = oauth.client_id
        self._client_secret = oauth.client_secret
        self._scope = " ".join(oauth.scopes) if oauth.scopes else None
        self._pinned = oauth.issuer
        self._issuer: str | None = None
        """The authorization server's issuer as its metadata spells it: the ID-JAG's
        audience."""
        self._provider: IdentityAssertionOAuthProvider | None = None
        self._finding = anyio.Lock()
        self._idp = IdentityProvider(owner, oauth.idp, owner.store, config.name, config.url)

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self._provider is None:
            response = yield request
            if response.status_code not in (401, 403):
                return
            async with self._finding:  # one discovery, however many requests met the 401
                if self._provider is None:
                    issuer = self._pinned
                    if issuer is None:
                        for url in build_protected_resource_metadata_discovery_urls(
                            extract_resource_metadata_from_www_auth(response), self._url
                        ):
                            answer = yield self._reaching(create_oauth_metadata_request(url))
                            issuer = await self._from_resource_metadata(answer)
                            if issuer is not None:
                                break
                        if issuer is None:
                            raise self._fail(
                                f"{self._url} publishes no protected resource metadata naming "
                                "its authorization server; set oauth.issuer"
                            )
                    methods: list[str] | None = None
                    for url in build_oauth_authorization_server_metadata_discovery_urls(
                        issuer, issuer
                    ):
                        answer = yield self._reaching(create_oauth_metadata_request(url))
                        self._owner.failure = None
                        ok, metadata = await handle_auth_metadata_response(answer)
                        if not ok:
                            break
                        if metadata is not None:
                            methods = metadata.token_endpoint_auth_methods_supported
                            if issuers_match(str(metadata.issuer), issuer):
                                issuer = str(metadata.issuer)  # its own spelling (a root's "/")
                            break
                    self._issuer = issuer
                    self._provider = self._build(issuer, methods)
        assert self._provider is not None
        flow = self._provider.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _reaching(self, request: httpx2.Request) -> httpx2.Request:
        """``request``, its URL named as the failure should it not be answered at all."""
        self._owner.failure = f"cannot reach {request.url}"
        return request

    async def _from_resource_metadata(self, answer: httpx2.Response) -> str | None:
        self._owner.failure = None
        """The first authorization server of the server's protected resource metadata,
        as it spells it, once its ``resource`` is this server."""
        metadata = await handle_protected_resource_response(answer)
        if metadata is None:
            return None
        resource = resource_url_from_server_url(self._url)
        if metadata.resource and not check_resource_allowed(resource, str(metadata.resource)):
            raise self._fail(
                f"the protected resource metadata is for {str(metadata.resource)[:200]}, not "
                f"{resource}"
            )
        with contextlib.suppress(ValueError, UnicodeDecodeError, AttributeError, TypeError):
            listed = json.loads(answer.content)["authorization_servers"][0]
            if isinstance(listed, str):
                return listed
        return str(metadata.authorization_servers[0])

    def _build(self, issuer: str, methods: list[str] | None) -> IdentityAssertionOAuthProvider:
        basic = (
            not methods or "client_secret_basic" in methods or "client_secret_post" not in methods
        )
        return IdentityAssertionOAuthProvider(
            server_url=self._url,
            storage=self._storage,
            client_id=self._client_id,
            client_secret=self._client_secret,
            issuer=issuer,
            assertion_provider=self._assertion,
            scope=self._scope,
            token_endpoint_auth_method="client_secret_basic" if basic else "client_secret_post",
        )

    async def _assertion(self, _audience: str, resource: str) -> str:
        assert self._issuer is not None
        return await self._idp.id_jag(self._issuer, resource, self._scope)

    def _fail(self, words: str) -> OAuthFlowError:
        self._owner.failure = words
        return OAuthFlowError(words)


class IdentityProvider:
    """The enterprise identity provider of one server: its ID token, and the exchange of
    it for an ID-JAG."""

    def __init__(
        self,
        owner: Authorizer,
        config: IdentityProviderConfig,
        store: TokenStore,
        name: str,
        url: str,
    ) -> None:
        self._owner = owner
        self._config = config
        self._store = store
        self._name = name
        self._url = url
        self._metadata: dict[str, Any] | None = None

    async def id_jag(self, audience: str, resource: str, scope: str | None) -> str:
        """An ID-JAG for the authorization server ``audience`` and the server
        ``resource``; a kept ID token the identity provider refuses is dropped and the
        person signs in again, once."""
        id_token, kept = await self._id_token()
        try:
            return await self._exchange(id_token, audience, resource, scope)
        except _Refused as refused:
            if not kept or refused.code != "invalid_grant":
                raise self._fail(str(refused)) from None
        self._store.update(self._name, self._url, idp=None)
        id_token, _ = await self._id_token()
        try:
            return await self._exchange(id_token, audience, resource, scope)
        except _Refused as refused:
            raise self._fail(str(refused)) from None

    # -- the ID token ------------------------------------------------------------------

    async def _id_token(self) -> tuple[str, bool]:
        """The person's ID token, and whether it was kept from an earlier sign-in."""
        if self._config.id_token_file is not None:
            return self._from_file(self._config.id_token_file), False
        kept = self._kept()
        if kept is not None:
            id_token = kept.get("id_token")
            expires_at = kept.get("expires_at")
            if (
                isinstance(id_token, str)
                and isinstance(expires_at, int | float)
                and time.time() < expires_at - ID_TOKEN_MARGIN_S
            ):
                return id_token, True
            refresh = kept.get("refresh_token")
            if isinstance(refresh, str):
                with contextlib.suppress(_Refused):
                    return await self._refreshed(refresh), False
        return await self._sign_in(), False

    def _kept(self) -> Mapping[str, Any] | None:
        kept = self._store.load(self._name, self._url).get("idp")
        if not isinstance(kept, dict) or kept.get("issuer") != self._config.issuer:
            return None
        return kept

    def _from_file(self, path: str) -> str:
        where = f"oauth.idp.idTokenFile ({path})"
        try:
            with open(Path(path).expanduser(), "rb") as handle:
                data = handle.read(ID_TOKEN_MAX_BYTES + 1)
        except OSError as exc:
            raise self._fail(f"{where}: cannot be read: {exc.strerror or exc}") from None
        try:
            id_token = data.decode("ascii").strip()
            claims = _claims(id_token)
        except (UnicodeDecodeError, ValueError):
            raise self._fail(f"{where}: does not hold an ID token (a JWT)") from None
        if len(data) > ID_TOKEN_MAX_BYTES:
            raise self._fail(f"{where}: does not hold an ID token (a JWT)")
        expires = claims.get("exp")
        if isinstance(expires, int | float) and expires <= time.time():
            stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expires))
            raise self._fail(
                f"{where}: the ID token expired at {stamp}; sign in to the identity provider again"
            )
        return id_token

    async def _sign_in(self) -> str:
        """A sign-in at the identity provider in the browser (OpenID Connect, code with
        PKCE): its ID token, kept while it is fresh."""
        metadata = await self._discovered()
        endpoint = metadata.get("authorization_endpoint")
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            raise self._fail(
                "the identity provider's configuration names no authorization_endpoint"
            )
        redirect_uri = await self._owner.redirect_uri()
        pkce = PKCEParameters.generate()
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        scopes = ["openid"]
        supported = metadata.get("scopes_supported")
        if isinstance(supported, list) and "offline_access" in supported:
            scopes.append("offline_access")
        query = urlencode({
            "response_type": "code", "client_id": self._config.client_id,
            "redirect_uri": redirect_uri, "scope": " ".join(scopes), "state": state,
            "nonce": nonce, "code_challenge": pkce.code_challenge,
            "code_challenge_method": "S256",
        })  # fmt: skip
        separator = "&" if "?" in endpoint else "?"
        result = await self._owner.signed_in(f"{endpoint}{separator}{query}")
        if result.state != state:
            raise self._fail("the identity provider's answer is not for this sign-in")
        try:
            answer = await self._token_request(
                {
                    "grant_type": "authorization_code",
                    "code": result.code,
                    "redirect_uri": redirect_uri,
                    "code_verifier": pkce.code_verifier,
                }
            )
        except _Refused as refused:
            raise self._fail(f"the sign-in at the identity provider failed: {refused}") from None
        return self._keep(answer, nonce)

    async def _refreshed(self, refresh_token: str) -> str:
        answer = await self._token_request(
            {"grant_type": "refresh_token", "refresh_token": refresh_token}
        )
        if not isinstance(answer.get("refresh_token"), str):
            answer["refresh_token"] = refresh_token  # not rotated: the old one still holds
        return self._keep(answer, None)

    def _keep(self, answer: dict[str, Any], nonce: str | None) -> str:
        """The answer's ID token once its claims hold (issuer, audience, expiry, nonce),
        kept with the refresh token."""
        id_token = answer.get("id_token")
        if not isinstance(id_token, str) or len(id_token) > ID_TOKEN_MAX_BYTES:
            raise self._fail("the identity provider's answer holds no ID token")
        try:
            claims = _claims(id_token)
        except ValueError:
            raise self._fail("the identity provider's ID token is not a JWT") from None
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        expires = claims.get("exp")
        problem = None
        if self._config.issuer is not None and claims.get("iss") != self._config.issuer:
            problem = "was issued by another issuer"
        elif self._config.client_id not in audiences:
            problem = "is not for this client"
        elif not isinstance(expires, int | float) or expires <= time.time():
            problem = "has expired"
        elif nonce is not None and claims.get("nonce") != nonce:
            problem = "is not for this sign-in (nonce)"
        if problem is not None:
            raise self._fail(f"the identity provider's ID token {problem}")
        refresh = answer.get("refresh_token")
        self._store.update(
            self._name,
            self._url,
            idp={
                "issuer": self._config.issuer,
                "id_token": id_token,
                "expires_at": expires,
                **({"refresh_token": refresh} if isinstance(refresh, str) else {}),
            },
        )
        return id_token

    # -- the exchange ------------------------------------------------------------------

    async def _exchange(
        self, id_token: str, audience: str, resource: str, scope: str | None
    ) -> str:
        answer = await self._token_request(
            {
                "grant_type": TOKEN_EXCHANGE,
                "requested_token_type": ID_JAG_TYPE,
                "audience": audience,
                "resource": resource,
                "subject_token": id_token,
                "subject_token_type": ID_TOKEN_TYPE,
                **({"scope": scope} if scope else {}),
            },
            step="the token exchange at the identity provider",
        )
        grant = answer.get("access_token")
        if answer.get("issued_token_type") != ID_JAG_TYPE or not isinstance(grant, str):
            raise self._fail(
                "the identity provider's token exchange answered without an ID-JAG "
                f"(issued_token_type {str(answer.get('issued_token_type'))[:100]!r})"
            )
        return grant

    # -- HTTP --------------------------------------------------------------------------

    async def _discovered(self) -> dict[str, Any]:
        """The identity provider's OpenID configuration, its ``issuer`` checked."""
        if self._metadata is not None:
            return self._metadata
        issuer = self._config.issuer
        assert issuer is not None
        url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        status, metadata = await self._send("GET", url)
        if status != 200 or metadata is None:
            raise self._fail(f"the identity provider's configuration {url}: HTTP {status}")
        if metadata.get("issuer") != issuer:
            raise self._fail(f"the identity provider's configuration at {url} names another issuer")
        self._metadata = metadata
        return metadata

    async def _token_request(
        self, form: dict[str, str], step: str = "the identity provider's token endpoint"
    ) -> dict[str, Any]:
        """POST ``form`` to the token endpoint, authenticated as the client; its JSON
        answer, or :class:`_Refused` with the error in words."""
        endpoint: object = self._config.token_endpoint
        metadata = self._metadata
        if endpoint is None:
            metadata = await self._discovered()
            endpoint = metadata.get("token_endpoint")
        methods = metadata.get("token_endpoint_auth_methods_supported") if metadata else None
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            raise self._fail("the identity provider's token endpoint is not known")
        headers: dict[str, str] = {}
        form = {**form, "client_id": self._config.client_id}
        secret = self._config.client_secret
        if secret is not None:
            listed = methods if isinstance(methods, list) else []
            if listed and "client_secret_basic" not in listed and "client_secret_post" in listed:
                form["client_secret"] = secret
            else:  # RFC 6749 section 2.3.1: each part form-encoded, then joined
                pair = f"{quote(self._config.client_id, safe='')}:{quote(secret, safe='')}"
                headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        status, answer = await self._send("POST", endpoint, form=form, headers=headers)
        if status == 200 and answer is not None:
            return answer
        raise _Refused(step, status, answer)

    async def _send(
        self,
        method: str,
        url: str,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any] | None]:
        """A request to the identity provider: its status and JSON object (``None``
        when it is not one), the body bounded."""
        try:
            async with (
                httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S, follow_redirects=False) as client,
                client.stream(
                    method,
                    url,
                    data=form,
                    headers={"Accept": "application/json", **(headers or {})},
                ) as response,
            ):
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise self._fail(f"the identity provider's answer from {url} is too large")
                status = response.status_code
        except httpx2.HTTPError as exc:
            raise self._fail(
                f"cannot reach the identity provider at {url}: {type(exc).__name__}"
            ) from None
        try:
            answer = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return status, None
        return status, answer if isinstance(answer, dict) else None

    def _fail(self, words: str) -> OAuthFlowError:
        self._owner.failure = words
        logger.warning("MCP server %s: %s", self._name, words)
        return OAuthFlowError(words)


class _Refused(Exception):
    """The identity provider's token endpoint refused: its error code and words."""

    def __init__(self, step: str, status: int, answer: Mapping[str, Any] | None) -> None:
        error = answer.get("error") if answer is not None else None
        self.code = error if isinstance(error, str) else None
        text = f"{step} refused it (HTTP {status}"
        if self.code is not None:
            text += f", {_printable(self.code, 60)}"
        description = answer.get("error_description") if answer is not None else None
        if isinstance(description, str) and description:
            text += f": {_printable(description, 200)}"
        super().__init__(text + ")")


def _claims(jwt: str) -> dict[str, Any]:
    """A JWT's claims, unverified: the identity provider's signature is for the servers
    that take it; the client reads the expiry and checks what OpenID Connect asks of a
    token it received straight from the token endpoint (issuer, audience, nonce)."""
    parts = jwt.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT")
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError("not a JWT") from exc
    if not isinstance(claims, dict):
        raise ValueError("not a JWT")
    return claims


def _printable(text: str, limit: int) -> str:
    return "".join(c if c.isprintable() else " " for c in text[:limit])
