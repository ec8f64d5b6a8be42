"""Wire types of MCP servers as tool sources: the entry that mounts one (``initialize``,
``run/start`` and ``mcp/add`` carry it). The ``mcp/*`` methods' own are in ``_mcp_methods``."""

from __future__ import annotations

from typing import Literal

import attrs

from ...tool import ToolKind
from ._optional import opt

McpProtocol = Literal["2025-11-25", "2026-07-28"]
McpTrust = ToolKind
"""The tool kind every tool of a server counts as: the core's own ``ToolKind``."""
McpStatus = Literal["starting", "ready", "failed", "stopped", "needsAuth"]
McpGrant = Literal["authorization_code", "client_credentials", "identity_assertion"]


@attrs.define
class McpIdentityProvider:
    """The enterprise identity provider of the ``identity_assertion`` grant (MCP
    Enterprise-Managed Authorization, SEP-990): the person's ID token from it is exchanged
    there (RFC 8693) for an ID-JAG, which the server's authorization server takes for an
    access token (RFC 7523)."""

    __wire_strict__ = True

    client_id: str
    """This client at the identity provider."""
    client_secret: str | None = opt()
    """Its secret, when the identity provider authenticates its clients. Default: the daemon's
    environment variable ``CLEVERAGENTS_MCP_IDP_SECRET_<NAME>``. Never logged, echoed or
    stored."""
    issuer: str | None = opt()
    """The identity provider's issuer: where the person signs in (OpenID Connect, in a
    browser) and whose OpenID configuration names the token endpoint."""
    token_endpoint: str | None = opt()
    """Its token endpoint, when its configuration should not be fetched."""
    id_token_file: str | None = opt()
    """A file (on the daemon's machine) holding the person's ID token from their single
    sign-on; without it they sign in at ``issuer``."""


@attrs.define
class McpOAuth:
    """How a ``url`` server's client authorizes (the MCP authorization spec). Every field is
    optional: without ``oauth`` at all, a 401 starts discovery, dynamic registration and a
    browser sign-in."""

    __wire_strict__ = True

    client_id: str | None = opt()
    """A client registered beforehand with the authorization server (used before a Client ID
    Metadata Document or dynamic registration)."""
    client_secret: str | None = opt()
    """Its secret, for a confidential client. Default: the daemon's environment variable
    ``CLEVERAGENTS_MCP_SECRET_<NAME>`` (the name upper-cased, ``-`` as ``_``). Never logged,
    echoed or stored."""
    scopes: list[str] | None = opt()
    """Scopes to ask for. Default: the ``scope`` of the server's challenge, else its metadata's
    ``scopes_supported`` (with ``offline_access`` when the authorization server offers it)."""
    client_metadata_url: str | None = opt()
    """An ``https`` URL of this client's Client ID Metadata Document, used as its client id where
    the authorization server supports it."""
    grant: McpGrant | None = opt()
    """``authorization_code`` (default: a person signs in in a browser),
    ``client_credentials`` (machine to machine: ``clientId`` with ``clientSecret`` or
    ``privateKeyFile``) or ``identity_assertion`` (enterprise-managed: ``clientId`` and
    ``clientSecret`` at the server's authorization server, and ``idp``)."""
    private_key_file: str | None = opt()
    """A PEM private key (on the daemon's machine) that signs the client's JWT assertion
    (``private_key_jwt``) for ``client_credentials``."""
    signing_algorithm: str | None = opt()
    """The JWT's algorithm (``RS256`` default; ``ES256``, ``PS256``, ``EdDSA``...)."""
    issuer: str | None = opt()
    """``identity_assertion``: the issuer of the server's authorization server, pinned.
    Default: the first one the server's protected resource metadata names."""
    idp: McpIdentityProvider | None = opt()
    """``identity_assertion``: the enterprise identity provider."""


@attrs.define
class McpServerEntry:
    """An MCP server mounted as a tool source: stdio (``command``) or streamable HTTP (``url``),
    exactly one of the two. Its tools appear as ``mcp:NAME/TOOL``."""

    __wire_strict__ = True  # a misspelt key is an error, not a silently ignored setting

    name: str
    """``^[A-Za-z0-9_-]{1,64}$``, unique in its scope (the daemon, or the run)."""
    command: str | None = opt()
    """The program to start. Exactly one of ``command`` and ``url``."""
    args: list[str] | None = opt()
    """Its arguments."""
    env: dict[str, str] | None = opt()
    """Added to its environment, which is the shell's allow-list (``PATH``, ``LANG``, ``LC_*``,
    ``TERM``, ``TZ``, ``HOME`` = the sandbox root, and ``shellEnv``), never the daemon's whole
    environment."""
    cwd: str | None = opt()
    """Its working directory. Default: the sandbox root (the first workspace folder)."""
    url: str | None = opt()
    """A streamable HTTP endpoint (``http`` or ``https``)."""
    headers: dict[str, str] | None = opt()
    """HTTP headers (for example a token). Never logged."""
    timeout_ms: int | None = opt()
    """Per call; default 120,000. Progress does not extend it."""
    startup_timeout_ms: int | None = opt()
    """How long a run waits for the server to be ready; default 10,000."""
    include: list[str] | None = opt()
    """Tool names or globs to mount; default all."""
    exclude: list[str] | None = opt()
    """Tool names or globs to leave out."""
    protocol: McpProtocol | None = opt()
    """Force a protocol version. Default: detect, with no fixed probe delay, and remember."""
    trust: McpTrust | None = opt()
    """The kind every tool of the server counts as for the automation profile (PROTOCOL.md §16).
    Default: ``readOnlyHint: true`` is a read, anything else a write."""
    oauth: McpOAuth | None = opt()
    """Authorization for a ``url`` server (see ``McpOAuth``). A server that answers 401 is
    authorized with OAuth unless ``headers`` holds ``Authorization`` or the URL credentials."""
