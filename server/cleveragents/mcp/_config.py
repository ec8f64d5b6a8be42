"""``McpServerConfig``: one MCP server entry, checked once when it is built.

It owns the rules an entry must keep (a name that can sit inside ``mcp:NAME/TOOL``,
exactly one transport, positive timeouts, an http(s) URL, no NUL characters anywhere a
process would see them). It knows nothing of the wire format the daemon reads entries
from, nor of how a server is started. Header and environment values never appear in its
``repr``: they may hold tokens.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import attrs

from cleveragents.tool import ToolKind

ProtocolVersion = Literal["2025-11-25", "2026-07-28"]
Trust = ToolKind
"""The kind a server's tools are trusted as: the core's read / write / execute."""
Transport = Literal["stdio", "http"]
Grant = Literal["authorization_code", "client_credentials", "identity_assertion"]

SERVER_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PROTOCOLS: tuple[str, ...] = get_args(ProtocolVersion)
_TRUSTS: tuple[str, ...] = get_args(Trust)
_GRANTS: tuple[str, ...] = get_args(Grant)
_SIGNING_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)


class McpConfigError(ValueError):
    """An invalid server entry; ``field`` names the offending field (``name``, ``url``...)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _frozen_map(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


def _tuple(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # a bare string would become a tuple of characters
        return (value,)
    return tuple(value)


def _args(value: Iterable[str]) -> tuple[str, ...]:
    """A server's arguments: a list of strings. One string is refused, not split (into
    characters, as it was, nor by a shell's rules the user did not ask for)."""
    if isinstance(value, str | bytes):
        raise McpConfigError(
            "args", f"must be a list of strings, not one string ({value!r}): give each "
            "argument as its own item, e.g. [\"-y\", \"some-server\"]",
        )  # fmt: skip
    if not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise McpConfigError("args", f"must be a list of strings, not {type(value).__name__}")
    return tuple(value)


def _optional_tuple(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else _tuple(value)


def _redacted(value: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{key!r}: '***'" for key in value) + "}"


def _url_repr(value: str | None) -> str:
    """The URL without any ``user:password@`` part."""
    if not isinstance(value, str):
        return repr(value)
    parts = urlsplit(value)
    if "@" not in parts.netloc:
        return repr(value)
    return repr(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl())


def _secret_repr(value: str | None) -> str:
    return "None" if value is None else "'***'"


def secret_variable(name: str) -> str:
    """The daemon's environment variable that holds server ``name``'s client secret when
    its entry gives none: ``CLEVERAGENTS_MCP_SECRET_<NAME>``."""
    return "CLEVERAGENTS_MCP_SECRET_" + name.upper().replace("-", "_")


def idp_secret_variable(name: str) -> str:
    """The daemon's environment variable that holds server ``name``'s identity provider
    client secret when its entry gives none: ``CLEVERAGENTS_MCP_IDP_SECRET_<NAME>``."""
    return "CLEVERAGENTS_MCP_IDP_SECRET_" + name.upper().replace("-", "_")


def _http_url(value: str, field: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise McpConfigError(field, "must be an http(s) URL without a query or fragment")


@attrs.frozen
class IdentityProviderConfig:
    """The enterprise identity provider of the ``identity_assertion`` grant (the MCP
    Enterprise-Managed Authorization extension, SEP-990): the person's ID token from it is
    exchanged there (RFC 8693) for an ID-JAG, which the MCP server's authorization server
    takes for an access token (RFC 7523).

    ``client_id`` (with ``client_secret`` when the identity provider authenticates its
    clients) is this client at the identity provider. The ID token is read from
    ``id_token_file`` when given (a token the user's single sign-on left there), else the
    person signs in at ``issuer`` in a browser (OpenID Connect, code with PKCE).
    ``token_endpoint`` defaults to the one ``issuer``'s OpenID configuration names.
    """

    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=_secret_repr)
    issuer: str | None = None
    token_endpoint: str | None = None
    id_token_file: str | None = None

    def __attrs_post_init__(self) -> None:
        for field in ("client_id", "client_secret", "issuer", "token_endpoint", "id_token_file"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value or "\0" in value):
                raise McpConfigError(f"oauth.idp.{field}", "must be a non-empty string without NUL")
        for field in ("issuer", "token_endpoint"):
            value = getattr(self, field)
            if value is not None:
                _http_url(value, f"oauth.idp.{field}")
        if self.issuer is None and self.token_endpoint is None:
            raise McpConfigError("oauth.idp.issuer", "give the identity provider's issuer")
        if self.issuer is None and self.id_token_file is None:
            raise McpConfigError(
                "oauth.idp.issuer",
                "signing in at the identity provider needs its issuer (or give id_token_file)",
            )


def _idp(value: IdentityProviderConfig | Mapping[str, Any] | None) -> IdentityProviderConfig | None:
    """An ``idp`` given as a table (a config file's) becomes its config."""
    if value is None or isinstance(value, IdentityProviderConfig):
        return value
    if not isinstance(value, Mapping):
        raise McpConfigError("oauth.idp", "must be a table of the identity provider's settings")
    known = [field.name for field in attrs.fields(IdentityProviderConfig)]
    unknown = [key for key in value if key not in known]
    if unknown:
        raise McpConfigError(
            f"oauth.idp.{unknown[0]}", f"is not a setting (known: {', '.join(known)})"
        )
    if "client_id" not in value:
        raise McpConfigError("oauth.idp.client_id", "the identity provider's client id is needed")
    return IdentityProviderConfig(**value)


@attrs.frozen
class OAuthConfig:
    """How an HTTP server's client authorizes (the MCP authorization spec), when the entry
    says more than "discover everything".

    ``grant`` is ``authorization_code`` (a person signs in in a browser; the default),
    ``client_credentials`` (machine to machine: ``client_id`` with ``client_secret``, or
    with ``private_key_file``, a PEM key that signs a JWT with ``signing_algorithm``) or
    ``identity_assertion`` (enterprise-managed: ``client_id`` and ``client_secret`` at the
    server's authorization server, whose ``issuer`` defaults to the one the server's
    metadata names, and the identity provider ``idp``).
    ``client_id`` (with ``client_secret`` for a confidential client) is a client
    registered beforehand; without one, ``client_metadata_url`` (an https URL of a Client
    ID Metadata Document) is used where the authorization server supports it, else
    dynamic registration. ``scopes`` replaces the scopes the server's challenge and
    metadata would choose. The secret never appears in a ``repr``.
    """

    client_id: str | None = None
    client_secret: str | None = attrs.field(default=None, repr=_secret_repr)
    scopes: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    client_metadata_url: str | None = None
    grant: Grant = "authorization_code"
    private_key_file: str | None = None
    signing_algorithm: str = "RS256"
    issuer: str | None = None
    idp: IdentityProviderConfig | None = attrs.field(default=None, converter=_idp)

    def __attrs_post_init__(self) -> None:
        if self.issuer is not None:
            if not isinstance(self.issuer, str) or "\0" in self.issuer:
                raise McpConfigError("oauth.issuer", "must be a URL without NUL")
            _http_url(self.issuer, "oauth.issuer")
        if self.grant == "identity_assertion":
            if self.idp is None:
                raise McpConfigError(
                    "oauth.idp", "the identity_assertion grant needs the identity provider"
                )
            if self.client_id is None or self.client_secret is None:
                raise McpConfigError(
                    "oauth.client_secret",
                    "the identity_assertion grant needs client_id and client_secret (a "
                    "confidential client of the server's authorization server)",
                )
        elif self.idp is not None:
            raise McpConfigError("oauth.idp", "only the identity_assertion grant uses it")
        elif self.issuer is not None:
            raise McpConfigError("oauth.issuer", "only the identity_assertion grant pins it")
        self._check_fields()

    def _check_fields(self) -> None:
        for field in ("client_id", "client_secret", "client_metadata_url", "private_key_file"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value or "\0" in value):
                raise McpConfigError(f"oauth.{field}", "must be a non-empty string without NUL")
        if self.grant not in _GRANTS:
            raise McpConfigError(
                "oauth.grant", f"must be one of {', '.join(_GRANTS)}, not {self.grant!r}"
            )
        if self.scopes is not None and not all(
            isinstance(s, str) and s and not any(c.isspace() for c in s) for s in self.scopes
        ):
            raise McpConfigError("oauth.scopes", "must hold scope names without spaces")
        if self.client_metadata_url is not None:
            parts = urlsplit(self.client_metadata_url)
            if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
                raise McpConfigError(
                    "oauth.client_metadata_url", "must be an https:// URL with a path"
                )
        if self.signing_algorithm not in _SIGNING_ALGORITHMS:
            raise McpConfigError(
                "oauth.signing_algorithm",
                f"must be one of {', '.join(_SIGNING_ALGORITHMS)}, not {self.signing_algorithm!r}",
            )
        if self.grant == "client_credentials":
            if self.client_id is None:
                raise McpConfigError("oauth.client_id", "the client_credentials grant needs it")
            if (self.client_secret is None) == (self.private_key_file is None):
                raise McpConfigError(
                    "oauth.client_secret",
                    "the client_credentials grant needs exactly one of client_secret and "
                    "private_key_file",
                )
        elif self.private_key_file is not None:
            raise McpConfigError(
                "oauth.private_key_file", "only the client_credentials grant signs with a key"
            )
        if self.client_secret is not None and self.client_id is None:
            raise McpConfigError("oauth.client_secret", "a client secret needs its client_id")


@attrs.frozen
class McpServerConfig:
    """One MCP server: stdio (``command``) or streamable HTTP (``url``).

    ``env`` is added on top of the caller's base environment (never the daemon's own);
    ``cwd`` defaults to the server's ``default_cwd`` (the sandbox root), and a relative
    ``cwd`` is taken from there. ``include``/``exclude`` hold tool names or
    ``fnmatch``-style globs matched against the server's own tool names. ``protocol``
    forces one protocol version (``None``: detect); ``trust`` overrides the kind every
    tool of this server gets (``None``: ``readOnlyHint`` decides).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = attrs.field(default=(), converter=_args)
    env: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_map, repr=_redacted, hash=False
    )
    cwd: str | None = None
    url: str | None = attrs.field(default=None, repr=_url_repr)
    headers: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_map, repr=_redacted, hash=False
    )
    timeout_s: float = 120.0
    startup_timeout_s: float = 10.0
    include: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    exclude: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    protocol: ProtocolVersion | None = None
    trust: Trust | None = None
    oauth: OAuthConfig | None = None
    """How an HTTP server authorizes; ``None``: discovered on a 401 (dynamic registration
    or a metadata document, then a browser sign-in)."""

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not SERVER_NAME_PATTERN.fullmatch(self.name):
            raise McpConfigError(
                "name", f"{self.name!r} does not match {SERVER_NAME_PATTERN.pattern}"
            )
        if (self.command is None) == (self.url is None):
            raise McpConfigError(
                "command", "give exactly one of command (stdio) and url (streamable HTTP)"
            )
        if self.command is not None:
            self._check_stdio()
        else:
            self._check_http()
        for field in ("timeout_s", "startup_timeout_s"):
            value = getattr(self, field)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise McpConfigError(field, f"must be a positive number of seconds, not {value!r}")
        for field in ("include", "exclude"):
            patterns = getattr(self, field)
            if patterns is not None and not all(isinstance(p, str) and p for p in patterns):
                raise McpConfigError(field, "must hold non-empty strings")
        if self.protocol is not None and self.protocol not in _PROTOCOLS:
            raise McpConfigError(
                "protocol", f"must be one of {', '.join(_PROTOCOLS)}, not {self.protocol!r}"
            )
        if self.trust is not None and self.trust not in _TRUSTS:
            raise McpConfigError(
                "trust", f"must be one of {', '.join(_TRUSTS)}, not {self.trust!r}"
            )

    def _check_stdio(self) -> None:
        if not isinstance(self.command, str) or not self.command or "\0" in self.command:
            raise McpConfigError("command", "must be a non-empty string without NUL")
        if not all(isinstance(arg, str) and "\0" not in arg for arg in self.args):
            raise McpConfigError("args", "must be strings without NUL")
        for key, value in self.env.items():
            if not isinstance(key, str) or not key or "=" in key or "\0" in key:
                raise McpConfigError("env", f"{key!r} is not a variable name")
            if not isinstance(value, str) or "\0" in value:
                raise McpConfigError("env", f"the value of {key} must be a string without NUL")
        if self.cwd is not None and (
            not isinstance(self.cwd, str) or not self.cwd or "\0" in self.cwd
        ):
            raise McpConfigError("cwd", "must be a non-empty path without NUL")
        if self.headers:
            raise McpConfigError("headers", "only a url server sends headers")
        if self.oauth is not None:
            raise McpConfigError("oauth", "only a url server authorizes with OAuth")

    def _check_http(self) -> None:
        url = self.url
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise McpConfigError("url", "must be an http:// or https:// URL with a host")
        for key, value in self.headers.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise McpConfigError("headers", "names and values must be strings")
            if not key or any(c in key for c in ":\r\n\0") or any(c in value for c in "\r\n\0"):
                raise McpConfigError("headers", f"{key!r} is not a valid header")
        for field in ("args", "env", "cwd"):
            if getattr(self, field):
                raise McpConfigError(field, "only a command (stdio) server takes it")

    @property
    def transport(self) -> Transport:
        """``stdio`` for a command, ``http`` for a URL."""
        return "stdio" if self.command is not None else "http"
