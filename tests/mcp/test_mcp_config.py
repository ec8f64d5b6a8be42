"""``McpServerConfig`` refuses bad entries naming the field, and never shows secrets."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from cleveragents.mcp import McpConfigError, McpServerConfig, OAuthConfig


def test_a_stdio_entry_and_an_http_entry_say_their_transport() -> None:
    assert McpServerConfig("git", command="uvx", args=["mcp-server-git"]).transport == "stdio"
    assert McpServerConfig("web", url="https://example.com/mcp").transport == "http"


def test_the_defaults_are_those_of_the_issue() -> None:
    config = McpServerConfig("git", command="uvx")
    assert (config.timeout_s, config.startup_timeout_s) == (120.0, 10.0)
    assert (config.include, config.exclude, config.protocol, config.trust) == (None,) * 4
    assert (config.args, dict(config.env), config.cwd) == ((), {}, None)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "", "command": "x"}, "name"),
        ({"name": "a" * 65, "command": "x"}, "name"),
        ({"name": "a/b", "command": "x"}, "name"),
        ({"name": "a b", "command": "x"}, "name"),
        ({"name": "a:b", "command": "x"}, "name"),
        ({"name": "s"}, "command"),
        ({"name": "s", "command": "x", "url": "http://h/"}, "command"),
        ({"name": "s", "command": ""}, "command"),
        ({"name": "s", "command": "x\0y"}, "command"),
        ({"name": "s", "command": "x", "args": ["a\0"]}, "args"),
        ({"name": "s", "command": "x", "env": {"A=B": "1"}}, "env"),
        ({"name": "s", "command": "x", "env": {"A": "\0"}}, "env"),
        ({"name": "s", "command": "x", "cwd": ""}, "cwd"),
        ({"name": "s", "command": "x", "headers": {"A": "1"}}, "headers"),
        ({"name": "s", "url": "ftp://h/"}, "url"),
        ({"name": "s", "url": "http:///path"}, "url"),
        ({"name": "s", "url": "localhost:8000"}, "url"),
        ({"name": "s", "url": "http://h/", "headers": {"A": "x\r\ny"}}, "headers"),
        ({"name": "s", "url": "http://h/", "headers": {"A:B": "x"}}, "headers"),
        ({"name": "s", "url": "http://h/", "env": {"A": "1"}}, "env"),
        ({"name": "s", "url": "http://h/", "args": ["a"]}, "args"),
        ({"name": "s", "command": "x", "timeout_s": 0}, "timeout_s"),
        ({"name": "s", "command": "x", "timeout_s": -1.0}, "timeout_s"),
        ({"name": "s", "command": "x", "timeout_s": float("inf")}, "timeout_s"),
        ({"name": "s", "command": "x", "timeout_s": float("nan")}, "timeout_s"),
        ({"name": "s", "command": "x", "timeout_s": True}, "timeout_s"),
        ({"name": "s", "command": "x", "startup_timeout_s": 0}, "startup_timeout_s"),
        ({"name": "s", "command": "x", "include": [""]}, "include"),
        ({"name": "s", "command": "x", "exclude": [3]}, "exclude"),
        ({"name": "s", "command": "x", "protocol": "2025-06-18"}, "protocol"),
        ({"name": "s", "command": "x", "trust": "admin"}, "trust"),
    ],
)
def test_a_bad_entry_is_refused_naming_its_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(McpConfigError) as raised:
        McpServerConfig(**fields)
    assert raised.value.field == field
    assert isinstance(raised.value, ValueError)


def test_header_and_env_values_and_url_credentials_never_show_in_repr() -> None:
    http = McpServerConfig(
        "web", url="https://user:hunter2@example.com/mcp", headers={"Authorization": "Bearer t0k3n"}
    )
    stdio = McpServerConfig("git", command="x", env={"GITHUB_TOKEN": "ghp_secret"})
    text = repr(http) + repr(stdio)
    for secret in ("hunter2", "t0k3n", "ghp_secret", "user:"):
        assert secret not in text
    for shown in ("Authorization", "GITHUB_TOKEN", "example.com"):
        assert shown in text


def test_the_entry_is_frozen_and_does_not_follow_the_callers_dicts() -> None:
    env = {"A": "1"}
    config = McpServerConfig("s", command="x", env=env, include=["a*"])
    env["A"] = "2"
    assert dict(config.env) == {"A": "1"}
    assert config.include == ("a*",)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.name = "t"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.env["B"] = "3"  # type: ignore[index]
    assert hash(config) == hash(McpServerConfig("s", command="x", env={"A": "1"}, include=["a*"]))


IDP = {"client_id": "idp-client", "issuer": "https://idp.example"}


@pytest.mark.parametrize(
    ("oauth", "field"),
    [
        ({"grant": "identity_assertion", "client_id": "c", "client_secret": "s"}, "oauth.idp"),
        ({"grant": "identity_assertion", "client_id": "c", "idp": IDP}, "oauth.client_secret"),
        ({"idp": IDP}, "oauth.idp"),
        ({"issuer": "https://as.example"}, "oauth.issuer"),
        ({"grant": "identity_assertion", "client_id": "c", "client_secret": "s", "idp": IDP,
          "issuer": "as.example"}, "oauth.issuer"),
        ({"grant": "identity_assertion", "client_id": "c", "client_secret": "s",
          "idp": {"client_id": "i", "token_endpoint": "https://idp.example/token"}},
         "oauth.idp.issuer"),
        ({"grant": "identity_assertion", "client_id": "c", "client_secret": "s",
          "idp": {"client_id": "i", "issuer": "https://idp.example?x=1"}}, "oauth.idp.issuer"),
        ({"grant": "identity_assertion", "client_id": "c", "client_secret": "s",
          "idp": {"issuer": "https://idp.example"}}, "oauth.idp.client_id"),
        ({"grant": "identity_assertion", "client_id": "c", "client_secret": "s",
          "idp": {**IDP, "clientId": "x"}}, "oauth.idp.clientId"),
        ({"grant": "identity_assertion", "client_id": "c", "client_secret": "s",
          "idp": "https://idp.example"}, "oauth.idp"),
    ],
)  # fmt: skip
def test_an_enterprise_entry_needs_its_identity_provider_and_a_confidential_client(
    oauth: dict[str, Any], field: str
) -> None:
    with pytest.raises(McpConfigError) as raised:
        OAuthConfig(**oauth)
    assert raised.value.field == field


def test_an_enterprise_entry_takes_a_table_for_its_identity_provider_and_hides_secrets() -> None:
    oauth = OAuthConfig(
        grant="identity_assertion", client_id="c", client_secret="as-secret-1",
        idp={**IDP, "client_secret": "idp-secret-2", "id_token_file": "~/.sso/id-token"},
    )  # fmt: skip
    assert oauth.idp is not None
    assert (oauth.idp.client_id, oauth.idp.id_token_file) == ("idp-client", "~/.sso/id-token")
    assert "secret-1" not in repr(oauth)
    assert "secret-2" not in repr(oauth)
    # An ID token file is enough without an issuer, given the token endpoint.
    OAuthConfig(
        grant="identity_assertion", client_id="c", client_secret="s",
        idp={"client_id": "i", "token_endpoint": "https://idp.example/t", "id_token_file": "f"},
    )  # fmt: skip
