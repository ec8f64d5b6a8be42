"""MCP server entries as both JSON-RPC faces receive them (LSP's
``initializationOptions.mcpServers``, ``mcp/add`` and ``run/start.mcpServers``; ACP's
session ``mcpServers``), checked and turned into ``McpServerConfig`` objects."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

from ..mcp import (
    IdentityProviderConfig,
    McpConfigError,
    McpServerConfig,
    OAuthConfig,
    idp_secret_variable,
    mcp_available,
    secret_variable,
)
from ..protocol import ParamsError, camel, wire
from ..runs import CapabilityError

DEFAULT_TIMEOUT_MS = 120_000
DEFAULT_STARTUP_TIMEOUT_MS = 10_000
EXTRA = "pip install 'cleveragents[mcp]'"


def to_configs(
    entries: Sequence[wire.McpServerEntry], field: str, taken: Iterable[str] = ()
) -> list[McpServerConfig]:
    """Check wire entries and turn them into configs; ``ParamsError`` names the field.

    Names are unique in their scope: among ``entries`` and against ``taken``."""
    if entries and not mcp_available():
        raise CapabilityError(
            f"{field}: MCP servers need the MCP SDK, which is not installed: {EXTRA}"
        )
    seen = set(taken)
    configs = []
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        if entry.name in seen:
            raise ParamsError(
                f"{where}.name: an MCP server named {entry.name!r} is already configured"
            )
        seen.add(entry.name)
        configs.append(_config(entry, where))
    return configs


def _config(entry: wire.McpServerEntry, where: str) -> McpServerConfig:
    for name, value in (
        ("timeoutMs", entry.timeout_ms),
        ("startupTimeoutMs", entry.startup_timeout_ms),
    ):
        if value is not None and value <= 0:
            raise ParamsError(f"{where}.{name}: must be positive")
    try:
        return McpServerConfig(
            name=entry.name,
            command=entry.command,
            args=tuple(entry.args or ()),
            env=dict(entry.env or {}),
            cwd=entry.cwd,
            url=entry.url,
            headers=dict(entry.headers or {}),
            timeout_s=(entry.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000,
            startup_timeout_s=(entry.startup_timeout_ms or DEFAULT_STARTUP_TIMEOUT_MS) / 1000,
            include=tuple(entry.include) if entry.include is not None else None,
            exclude=tuple(entry.exclude) if entry.exclude is not None else None,
            protocol=entry.protocol,
            trust=entry.trust,
            oauth=_oauth(entry, os.environ),
        )
    except McpConfigError as exc:
        field = _WIRE_FIELDS.get(exc.field, camel(exc.field))
        raise ParamsError(f"{where}.{field}: {exc.problem}") from None


def _oauth(entry: wire.McpServerEntry, environ: Mapping[str, str]) -> OAuthConfig | None:
    """The entry's ``oauth``, its client secret from the environment when not given (a
    secret kept out of the editor's settings)."""
    oauth = entry.oauth
    secret = oauth.client_secret if oauth is not None else None
    if (
        secret is None
        and oauth is not None
        and oauth.client_id is not None
        and oauth.private_key_file is None  # a key signs instead: no secret goes with it
    ):
        secret = environ.get(secret_variable(entry.name)) or None
    if oauth is None:
        return None
    idp = None
    if oauth.idp is not None:
        idp = IdentityProviderConfig(
            client_id=oauth.idp.client_id,
            client_secret=oauth.idp.client_secret
            or environ.get(idp_secret_variable(entry.name))
            or None,
            issuer=oauth.idp.issuer,
            token_endpoint=oauth.idp.token_endpoint,
            id_token_file=oauth.idp.id_token_file,
        )
    return OAuthConfig(
        client_id=oauth.client_id,
        client_secret=secret,
        scopes=tuple(oauth.scopes) if oauth.scopes is not None else None,
        client_metadata_url=oauth.client_metadata_url,
        grant=oauth.grant or "authorization_code",
        private_key_file=oauth.private_key_file,
        signing_algorithm=oauth.signing_algorithm or "RS256",
        issuer=oauth.issuer,
        idp=idp,
    )


_WIRE_FIELDS = {
    "timeout_s": "timeoutMs",
    "startup_timeout_s": "startupTimeoutMs",
    "oauth.client_id": "oauth.clientId",
    "oauth.client_secret": "oauth.clientSecret",
    "oauth.client_metadata_url": "oauth.clientMetadataUrl",
    "oauth.private_key_file": "oauth.privateKeyFile",
    "oauth.signing_algorithm": "oauth.signingAlgorithm",
    "oauth.idp.client_id": "oauth.idp.clientId",
    "oauth.idp.client_secret": "oauth.idp.clientSecret",
    "oauth.idp.token_endpoint": "oauth.idp.tokenEndpoint",
    "oauth.idp.id_token_file": "oauth.idp.idTokenFile",
}
