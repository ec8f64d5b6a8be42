"""Authorization of a streamable HTTP server, as the MCP authorization spec says: the
SDK's OAuth client (``mcp.client.auth``) does discovery (RFC 9728, RFC 8414 and OpenID,
with the spec's fallbacks and its ``resource`` check), registration (pre-registered, a
Client ID Metadata Document, else RFC 7591), PKCE, the ``resource`` parameter, scopes,
refresh and step-up; this module gives it what it lacks:

- a token storage on :class:`~._tokens.TokenStore` (0600 under the state dir), which
  keeps when a token expires so a restarted daemon refreshes instead of using a stale one;
- a refresh on a 401 before a new sign-in (the SDK goes straight to the browser);
- the browser step: a loopback listener (``http://127.0.0.1:PORT/callback``) that takes
  only the ``state`` of the flow in progress, and :class:`AuthEvents` told the URL to
  open (the server's status becomes ``needsAuth``); the server's start-up clock stops
  meanwhile, and the wait is bounded by :data:`AUTHORIZATION_TIMEOUT_S`;
- the client credentials grant from an entry's ``oauth`` (a secret, basic or post, or a
  private key that signs a JWT), and enterprise-managed authorization (``_enterprise``);
- words for what failed (:attr:`Authorizer.failure`), never holding a token, a secret or
  a code.

Imports the SDK: loaded only through ``_transport``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
import warnings
from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl, ValidationError

from ._config import McpServerConfig
from ._enterprise import EnterpriseAuth
from ._errors import McpStartError
from ._link import AuthEvents
from ._tokens import TokenStore

logger = logging.getLogger("cleveragents.mcp")

AUTHORIZATION_TIMEOUT_S = 600.0
"""How long a sign-in in the browser may take before the server's start fails."""
CALLBACK_PATH = "/callback"
MAX_CALLBACK_REQUEST = 8 * 1024
"""The most a request to the loopback listener may send before its blank line."""
MAX_CALLBACK_CONNECTIONS = 8
CALLBACK_READ_TIMEOUT_S = 10.0
PRIVATE_KEY_MAX_BYTES = 64 * 1024
MAX_ISSUER_CHARS = 2048
"""The longest issuer a 2025-03-26 server's metadata may name and be taken."""
REFRESH_MARGIN_S = 30.0
"""How long before its expiry a token is refreshed (at most; a tenth of its life when
that is shorter)."""

_DONE_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>cleveragents</title>"
    b"<p>Signed in. You can close this tab and go back to cleveragents.</p>"
)
_REFUSED_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>cleveragents</title>"
    b"<p>This is not the sign-in cleveragents is waiting for.</p>"
)
_FAILED_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>cleveragents</title>"
    b"<p>The authorization server refused the sign-in; cleveragents reports why.</p>"
)


class Authorizer:
    """Everything one HTTP connection needs for OAuth: the ``httpx2.Auth`` to put on its
    client, and the words for the last failure."""

    def __init__(
        self,
        config: McpServerConfig,
        store: TokenStore,
        events: AuthEvents,
        pause_start_clock: Callable[[], Callable[[], None]],
    ) -> None:
        assert config.url is not None
        self.config = config
        self.url = config.url
        self.store = store
        self.events = events
        self.pause_start_clock = pause_start_clock
        self.failure: str | None = None
        self.callback = LoopbackCallback()
        self.auth: httpx2.Auth | None = None
        self._where: tuple[AsyncExitStack, anyio.abc.TaskGroup, StoredTokens] | None = None
        """Where the listener goes once a sign-in may follow (set by ``open``)."""
        self._resume_clock: Callable[[], None] = lambda: None

    async def open(self, stack: AsyncExitStack, tasks: anyio.abc.TaskGroup) -> httpx2.Auth:
        """Build the provider for the entry; the code grant's listener opens on the
        server's first 401 or 403 (:meth:`listening`), not before."""
        oauth = self.config.oauth
        storage = StoredTokens(self.store, self.config.name, self.url)
        if oauth is not None and oauth.grant == "client_credentials":
            self.auth = _client_credentials(self.config, storage)
            return self.auth
        self._where = (stack, tasks, storage)
        if oauth is not None and oauth.grant == "identity_assertion":
            self.auth = EnterpriseAuth(self, self.config, storage)
            return self.auth
        redirect = f"http://127.0.0.1{CALLBACK_PATH}"  # its port once the listener is up
        metadata = OAuthClientMetadata(
            client_name="cleveragents",
            redirect_uris=[AnyUrl(redirect)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none"
            if oauth is None or oauth.client_secret is None
            else "client_secret_basic",
            scope=" ".join(oauth.scopes) if oauth is not None and oauth.scopes else None,
        )
        if oauth is not None and oauth.client_id is not None:
            storage.pre_registered = OAuthClientInformationFull(
                client_id=oauth.client_id,
                client_secret=oauth.client_secret,
                redirect_uris=[AnyUrl(redirect)],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="client_secret_basic"
                if oauth.client_secret is not None
                else "none",
            )
        self.auth = _CodeGrant(
            self,
            server_url=self.url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=oauth.client_metadata_url if oauth is not None else None,
        )
        return self.auth

    async def listening(self, context: Any) -> None:
        """Open the loopback listener (once, when a sign-in may follow: the server said
        401 or 403), and put its URI in the client's metadata and registration. The
        port of a stored registration is taken again when it is free, so a server that
        compares ports keeps accepting it; else a free one."""
        if self.callback.port or self._where is None:
            return
        stack, tasks, storage = self._where
        await self.callback.listen(stack, tasks, storage.registered_port())
        redirect = AnyUrl(f"http://127.0.0.1:{self.callback.port}{CALLBACK_PATH}")
        context.client_metadata.redirect_uris = [redirect]
        if storage.pre_registered is not None:  # the client_info the flow holds
            storage.pre_registered.redirect_uris = [redirect]

    async def redirect_uri(self) -> str:
        """The loopback redirect URI of a sign-in elsewhere (the identity provider's),
        its listener opened on a free port if it is not yet."""
        if not self.callback.port:
            assert self._where is not None
            stack, tasks, _ = self._where
            await self.callback.listen(stack, tasks, None)
        return f"http://127.0.0.1:{self.callback.port}{CALLBACK_PATH}"

    async def signed_in(self, url: str) -> AuthorizationCodeResult:
        """The browser step of a sign-in at ``url`` (the server's status ``needsAuth``
        meanwhile): its code, or ``OAuthFlowError`` with :attr:`failure` set."""
        await self._redirect(url)
        return await self._callback()

    async def _redirect(self, url: str) -> None:
        state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        self.callback.expect(state)
        self._resume_clock = self.pause_start_clock()
        logger.info("MCP server %s needs authorization: waiting for the sign-in", self.config.name)
        self.events.authorizing(url)

    async def _callback(self) -> AuthorizationCodeResult:
        try:
            with anyio.fail_after(AUTHORIZATION_TIMEOUT_S):
                result = await self.callback.result()
        except TimeoutError:
            self.failure = (
                f"the sign-in was not completed within {AUTHORIZATION_TIMEOUT_S / 60:g} minutes"
            )
            raise OAuthFlowError(self.failure) from None
        finally:
            self.events.authorizing(None)
            self._resume_clock()
        if isinstance(result, str):
            self.failure = result
            raise OAuthFlowError(result)
        return result


class _CodeGrant(OAuthClientProvider):
    """The SDK's authorization code flow, plus a refresh on a 401 before a new sign-in,
    the stored expiry, and the pre-registered client's auth method as the server asks."""

    def __init__(self, owner: Authorizer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._owner = owner
        self._legacy_issuer: str | None = None
        """The issuer a 2025-03-26 server's own metadata names on its own origin (see
        :meth:`_legacy_metadata`), once seen."""

    def _expected_issuer(self) -> str:
        if self.context.auth_server_url is None and self._legacy_issuer is not None:
            return self._legacy_issuer
        return super()._expected_issuer()

    async def _legacy_metadata(self, outgoing: httpx2.Request, response: httpx2.Response) -> bool:
        """Whether ``response`` is a 2025-03-26 server's metadata (no protected resource
        metadata, so fetched from its origin's well-known URL) naming an issuer with a
        path on that same origin, as servers of that revision may: the SDK holds the
        issuer to the origin (RFC 8414 section 3.3) and would refuse it. Such an issuer
        is taken (remembered for the flow's retry), since the metadata came from the
        server's own origin and names it; an issuer on any other origin is still
        refused, which is what the check is for (mix-up attacks)."""
        if self._legacy_issuer is not None or self.context.auth_server_url is not None:
            return False
        origin = _origin_of(self.context.server_url)
        if response.status_code != 200 or str(outgoing.url) != (
            f"{origin}/.well-known/oauth-authorization-server"
        ):
            return False
        with contextlib.suppress(ValueError, UnicodeDecodeError, AttributeError):
            issuer = json.loads(await response.aread()).get("issuer")
            if (
                isinstance(issuer, str)
                and len(issuer) <= MAX_ISSUER_CHARS
                and issuer.rstrip("/") != origin
                and _origin_of(issuer) == origin
                and not urlsplit(issuer).query
                and not urlsplit(issuer).fragment
            ):
                self._legacy_issuer = issuer
                logger.info(
                    "MCP server %s: its 2025-03-26 authorization metadata names the issuer "
                    "%s on its own origin; taken",
                    self._owner.config.name,
                    issuer,
                )
                return True
        return False

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        if isinstance(storage, StoredTokens) and storage.expires_at is not None:
            self.context.token_expiry_time = storage.expires_at

    async def _perform_authorization(self) -> httpx2.Request:
        _fit_auth_method(self.context)
        return await super()._perform_authorization()

    def _refresh_early(self) -> None:
        """A token about to expire (within a tenth of its life, at most 30 s) counts as
        expired, so the flow refreshes it before the request rather than after a 401."""
        context = self.context
        tokens, expiry = context.current_tokens, context.token_expiry_time
        if tokens is None or expiry is None or not context.can_refresh_token():
            return
        margin = min(REFRESH_MARGIN_S, float(tokens.expires_in or 0) / 10)
        if time.time() > expiry - margin:
            context.token_expiry_time = 1.0

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow; when the request itself comes back 401 while a refresh token
        is held, it starts over with the token marked expired (so it refreshes first, and
        only a refused refresh leads to a new sign-in)."""
        retried = False
        self._refresh_early()
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request and response.status_code in (401, 403):
                    await self._owner.listening(self.context)
                if (
                    outgoing is request
                    and response.status_code == 401
                    and not retried
                    and self.context.can_refresh_token()
                ):
                    retried = True
                    await flow.aclose()
                    self.context.token_expiry_time = 1.0  # long past: refresh first
                    flow = super()._auth_flow(request)
                    outgoing = await flow.__anext__()
                    continue
                if outgoing is not request and await self._legacy_metadata(outgoing, response):
                    await flow.aclose()  # it holds the origin as the issuer: start over
                    flow = super()._auth_flow(request)
                    outgoing = await flow.__anext__()
                    continue
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


def _origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, as the SDK builds a 2025-03-26 server's
    well-known URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _fit_auth_method(context: Any) -> None:
    """A pre-registered confidential client authenticates as the authorization server's
    metadata allows: ``client_secret_basic`` if listed (or nothing is), else
    ``client_secret_post``."""
    info = context.client_info
    metadata = context.oauth_metadata
    if info is None or info.client_secret is None or metadata is None:
        return
    supported = metadata.token_endpoint_auth_methods_supported
    if supported and "client_secret_basic" not in supported and "client_secret_post" in supported:
        info.token_endpoint_auth_method = "client_secret_post"


def _client_credentials(config: McpServerConfig, storage: StoredTokens) -> httpx2.Auth:
    oauth = config.oauth
    assert oauth is not None
    assert oauth.client_id is not None
    assert config.url is not None
    scope = " ".join(oauth.scopes) if oauth.scopes else None
    # The SDK warns when no issuer is named (it will be required in its 3.0); ours come
    # from the server's metadata, as the spec's discovery gives them.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if oauth.private_key_file is not None:
            key = _private_key(oauth.private_key_file)
            signer = SignedJWTParameters(
                issuer=oauth.client_id,
                subject=oauth.client_id,
                signing_key=key,
                signing_algorithm=oauth.signing_algorithm,
            )
            return _KeyCredentials(
                server_url=config.url,
                storage=storage,
                client_id=oauth.client_id,
                assertion_provider=signer.create_assertion_provider(),
                scope=scope,
            )
        assert oauth.client_secret is not None
        return _SecretCredentials(
            server_url=config.url,
            storage=storage,
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            scope=scope,
        )


class _SecretCredentials(ClientCredentialsOAuthProvider):
    """Client credentials with a secret, sent as the server's metadata asks."""

    async def _perform_authorization(self) -> httpx2.Request:
        _fit_auth_method(self.context)
        return await super()._perform_authorization()


class _KeyCredentials(PrivateKeyJWTOAuthProvider):
    """Client credentials with a JWT signed by the entry's private key."""


def _private_key(path: str) -> str:
    try:
        with open(Path(path).expanduser(), "rb") as handle:
            data = handle.read(PRIVATE_KEY_MAX_BYTES + 1)
    except OSError as exc:
        raise McpStartError(
            f"oauth.privateKeyFile: cannot read {path}: {exc.strerror or exc}"
        ) from None
    if len(data) > PRIVATE_KEY_MAX_BYTES or b"PRIVATE KEY" not in data:
        raise McpStartError(f"oauth.privateKeyFile: {path} is not a PEM private key")
    return data.decode("ascii", "replace")


class StoredTokens(TokenStorage):
    """The SDK's token storage on our :class:`TokenStore`: tokens with their expiry as a
    wall-clock time, and the client registration (a pre-registered client from the entry
    wins over a stored one)."""

    def __init__(self, store: TokenStore, name: str, url: str) -> None:
        self._store = store
        self._name = name
        self._url = url
        self.pre_registered: OAuthClientInformationFull | None = None
        self.expires_at: float | None = None

    def _record(self) -> dict[str, Any]:
        return self._store.load(self._name, self._url)

    def registered_port(self) -> int | None:
        """The loopback port of the stored registration's redirect URI (reused, so a
        server that checks the port strictly keeps accepting it)."""
        client = self._record().get("client")
        uris = client.get("redirect_uris") if isinstance(client, dict) else None
        if not isinstance(uris, list) or not uris or not isinstance(uris[0], str):
            return None
        parts = urlsplit(uris[0])
        return parts.port if parts.hostname == "127.0.0.1" else None

    async def get_tokens(self) -> OAuthToken | None:
        record = self._record()
        try:
            tokens = OAuthToken.model_validate(record["tokens"]) if "tokens" in record else None
        except ValidationError:
            return None
        expires = record.get("expires_at")
        self.expires_at = float(expires) if isinstance(expires, int | float) else None
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        self.expires_at = expires_at
        self._store.update(
            self._name,
            self._url,
            tokens=tokens.model_dump(mode="json", exclude_none=True),
            expires_at=expires_at,
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.pre_registered is not None:
            return self.pre_registered
        record = self._record()
        try:
            return (
                OAuthClientInformationFull.model_validate(record["client"])
                if "client" in record
                else None
            )
        except ValidationError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.pre_registered is not None:
            return  # the entry's client is not ours to store
        self._store.update(
            self._name, self._url, client=client_info.model_dump(mode="json", exclude_none=True)
        )


class LoopbackCallback:
    """The redirect URI's listener on 127.0.0.1: it answers only ``GET /callback`` with
    the ``state`` of the sign-in in progress; anything else gets a 400 and changes
    nothing (any local program can reach a loopback port)."""

    def __init__(self) -> None:
        self.port = 0
        self._state: str | None = None
        self._outcome: AuthorizationCodeResult | str | None = None
        self._arrived = anyio.Event()
        self._open = 0

    async def listen(
        self, stack: AsyncExitStack, tasks: anyio.abc.TaskGroup, port: int | None
    ) -> None:
        listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None
        if port:
            with contextlib.suppress(OSError):
                listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
        if listener is None:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        await stack.enter_async_context(listener)
        self.port = int(listener.extra(anyio.abc.SocketAttribute.local_port))

        async def serve() -> None:
            try:
                await listener.serve(self._serve)
            except* anyio.ClosedResourceError:  # the connection ended first
                pass

        tasks.start_soon(serve)

    def expect(self, state: str) -> None:
        self._state = state
        self._outcome = None
        self._arrived = anyio.Event()

    async def result(self) -> AuthorizationCodeResult | str:
        """The code (with state and ``iss``), or the server's refusal in words."""
        await self._arrived.wait()
        assert self._outcome is not None
        return self._outcome

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            if self._open >= MAX_CALLBACK_CONNECTIONS:
                return
            self._open += 1
            try:
                with anyio.move_on_after(CALLBACK_READ_TIMEOUT_S):
                    target = await _request_target(stream)
                    status, page = self._take(target)
                    await stream.send(
                        f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                        f"Content-Length: {len(page)}\r\nConnection: close\r\n"
                        "Cache-Control: no-store\r\n\r\n".encode()
                        + page
                    )
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError, ValueError):
                pass
            finally:
                self._open -= 1

    def _take(self, target: str | None) -> tuple[str, bytes]:
        if target is None:
            return "400 Bad Request", _REFUSED_PAGE
        parts = urlsplit(target)
        if parts.path != CALLBACK_PATH:
            return "404 Not Found", _REFUSED_PAGE
        query = parse_qs(parts.query)

        def one(key: str) -> str | None:
            values = query.get(key)
            return values[0] if values else None

        state = one("state")
        expected = self._state
        if (
            expected is None
            or state is None
            or self._arrived.is_set()
            or not secrets.compare_digest(state.encode(), expected.encode())
        ):
            return "400 Bad Request", _REFUSED_PAGE
        error = one("error")
        code = one("code")
        if error is not None or not code:
            reason = _printable(error or "no code")
            described = one("error_description")
            self._outcome = f"the authorization server refused the sign-in: {reason}" + (
                f" ({_printable(described)})" if described else ""
            )
            self._arrived.set()
            return "400 Bad Request", _FAILED_PAGE
        self._outcome = AuthorizationCodeResult(code=code, state=state, iss=one("iss"))
        self._arrived.set()
        return "200 OK", _DONE_PAGE


async def _request_target(stream: anyio.abc.SocketStream) -> str | None:
    """The target of a ``GET`` request, read up to its blank line (bounded)."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_CALLBACK_REQUEST:
            return None
        data += await stream.receive(4096)
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    method, _, rest = line.partition(" ")
    target = rest.rpartition(" ")[0]
    return target if method == "GET" and target.startswith("/") else None


def _printable(text: str) -> str:
    """A server's words, bounded and without control characters."""
    return "".join(c if c.isprintable() else "?" for c in text[:200])
