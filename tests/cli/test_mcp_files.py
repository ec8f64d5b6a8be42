"""The entries of ``config.toml``'s ``[mcp_servers.NAME]`` tables, ``.mcp.json`` files and
``--mcp`` flags, read in process: Codex's keys, values from the environment, errors that
name the file and the key, and secrets that never show."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleveragents import _mcp_files as files


def one(table: dict[str, object], environ: dict[str, str] | None = None) -> files.Entry:
    [entry] = files.toml_entries({"s": table}, "config.toml", environ or {})
    return entry


def test_codex_keys_map_to_the_entry() -> None:
    entry = one({"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"},
                 "env_vars": ["TOKEN", "UNSET"], "tool_timeout_sec": 30,
                 "startup_timeout_sec": 5, "enabled_tools": ["get_*"],
                 "disabled_tools": ["delete"], "trust": "read"},
                {"TOKEN": "t0k"})  # fmt: skip
    config = entry.config
    assert (config.command, config.args) == ("uvx", ("mcp-server-git",))
    assert dict(config.env) == {"A": "1", "TOKEN": "t0k"}  # UNSET: not set, not passed
    assert (config.timeout_s, config.startup_timeout_s) == (30.0, 5.0)
    assert (config.include, config.exclude, config.trust) == (("get_*",), ("delete",), "read")


def test_header_values_from_the_environment_never_show() -> None:
    entry = one({"url": "https://h.test/mcp", "bearer_token_env_var": "TRACKER",
                 "env_http_headers": {"X-Key": "KEY"}, "http_headers": {"X-Team": "blue"}},
                {"TRACKER": "secret-bearer", "KEY": "secret-key"})  # fmt: skip
    assert dict(entry.config.headers) == {
        "X-Team": "blue",
        "X-Key": "secret-key",
        "Authorization": "Bearer secret-bearer",
    }
    shown = files.describe(entry.config) + repr(entry.config)
    assert "secret" not in shown
    assert "Authorization" in files.describe(entry.config)


def test_oauth_client_secrets_come_from_the_environment_when_the_file_gives_none() -> None:
    idp = {"client_id": "idp-client", "issuer": "https://idp.test"}
    oauth: dict[str, Any] = {"grant": "identity_assertion", "client_id": "c", "idp": idp}
    environ = {"CLEVERAGENTS_MCP_SECRET_S": "as-secret", "CLEVERAGENTS_MCP_IDP_SECRET_S": "idp-s"}

    def read(oauth: dict[str, Any], environ: dict[str, str]) -> Any:
        return one({"url": "https://h.test/mcp", "oauth": oauth}, environ).config.oauth

    taken = read(oauth, environ)
    assert (taken.client_secret, taken.idp.client_secret) == ("as-secret", "idp-s")
    # The file's own secret wins; without either, the grant says what it needs.
    assert read({**oauth, "client_secret": "in-file"}, environ).client_secret == "in-file"
    with pytest.raises(files.McpFileError, match=r"mcp_servers\.s\.oauth\.client_secret: "):
        read(oauth, {})
    with pytest.raises(files.McpFileError, match=r"mcp_servers\.s\.oauth\.idp\.nope: "):
        read({**oauth, "idp": {**idp, "nope": 1}}, environ)


def test_a_disabled_table_is_kept_but_marked() -> None:
    assert one({"command": "x", "enabled": False}).enabled is False


def test_an_oauth_table_becomes_the_entry_s_oauth_and_its_errors_name_the_key() -> None:
    entry = one({"url": "https://h.test/mcp", "oauth": {"client_id": "abc", "scopes": ["read"]}})
    oauth = entry.config.oauth
    assert oauth is not None
    assert (oauth.client_id, oauth.scopes) == ("abc", ("read",))
    with pytest.raises(files.McpFileError, match=r"mcp_servers\.s\.oauth: unknown key 'nope'"):
        one({"url": "https://h.test/mcp", "oauth": {"nope": 1}})


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"command": "x", "args": "a b"}, "mcp_servers.s.args: must be a list of strings, not one"),
        ({"command": "x", "args": ["a", 1]}, "mcp_servers.s.args: must be a list of strings"),
        ({"command": "x", "env": ["A=1"]}, "mcp_servers.s.env: must be a table of strings"),
        ({"command": "x", "tool_timeout_sec": True}, "mcp_servers.s.tool_timeout_sec: must be a number"),
        ({"command": "x", "enabled": "no"}, "mcp_servers.s.enabled: must be true or false"),
        ({"url": "ftp://h/"}, "mcp_servers.s.url: must be an http:// or https:// URL"),
        ({}, "mcp_servers.s.command: give exactly one"),
    ],
)  # fmt: skip
def test_each_bad_value_is_an_error_naming_the_file_and_the_key(
    table: dict[str, object], words: str
) -> None:
    with pytest.raises(files.McpFileError) as caught:
        one(table)
    assert str(caught.value).startswith(f"config.toml: {words}")


def test_a_bad_name_is_named() -> None:
    with pytest.raises(files.McpFileError, match=r"mcp_servers\.bad name: the name"):
        files.toml_entries({"bad name": {"command": "x"}}, "config.toml", {})


def test_the_mcp_flag_splits_as_a_shell_and_takes_a_url() -> None:
    entry = files.flag_entry("git=uvx mcp-server-git --repository 'my repo'")
    assert (entry.config.command, entry.config.args) == (
        "uvx", ("mcp-server-git", "--repository", "my repo")
    )  # fmt: skip
    assert files.flag_entry("docs=https://h.test/mcp").config.url == "https://h.test/mcp"


def test_an_approval_fingerprint_changes_with_any_field_and_keeps_no_value() -> None:
    base = {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "abc"}}
    mark = files.fingerprint(base)
    assert "abc" not in mark
    for changed in ({**base, "args": ["-y", "other"]}, {**base, "env": {"TOKEN": "abd"}},
                    {**base, "command": "npm"}):  # fmt: skip
        assert files.fingerprint(changed) != mark
    assert files.fingerprint(dict(reversed(base.items()))) == mark  # key order is not a change


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip
FUZZ_DIR = Path(tempfile.mkdtemp(prefix="mcp-json-fuzz-"))
KEYS = st.sampled_from([*files.TOML_KEYS, *files.JSON_KEYS, "name", "x"])


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=6), st.dictionaries(KEYS, JSON, max_size=6), max_size=3))
def test_any_table_of_any_shape_is_an_entry_or_an_error_naming_the_file(tables: Any) -> None:
    try:
        names = [entry.name for entry in files.toml_entries(tables, "config.toml", {"V": "v"})]
    except files.McpFileError as exc:
        names = [str(exc)]
    assert names == list(tables) or names[0].startswith("config.toml: ")


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=6), st.dictionaries(KEYS, JSON, max_size=6), max_size=3)
       | JSON)  # fmt: skip
def test_any_mcp_json_is_entries_or_an_error_naming_the_file(document: Any) -> None:
    path = FUZZ_DIR / ".mcp.json"
    path.write_text(
        json.dumps({"mcpServers": document} if isinstance(document, dict) else document)
    )
    try:
        said = f"{path}: {len(files.json_entries(path))} entries"
    except files.McpFileError as exc:
        said = str(exc)
    assert said.startswith(f"{path}: ")


def test_a_private_key_entry_takes_no_secret_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client_credentials entry that signs with a key gets no client secret from
    CLEVERAGENTS_MCP_SECRET_<NAME> (both at once is refused), in config.toml and on the
    wire alike."""
    from cleveragents.protocol import wire
    from cleveragents.rpc import to_configs

    oauth = {"grant": "client_credentials", "client_id": "bot", "private_key_file": "k.pem"}
    environ = {"CLEVERAGENTS_MCP_SECRET_S": "a-secret"}
    taken = one({"url": "https://h.test/mcp", "oauth": oauth}, environ).config.oauth
    assert taken is not None
    assert (taken.private_key_file, taken.client_secret) == ("k.pem", None)
    monkeypatch.setenv("CLEVERAGENTS_MCP_SECRET_S", "a-secret")
    entry = wire.McpServerEntry(name="s", url="https://h.test/mcp", oauth=wire.McpOAuth(
        grant="client_credentials", client_id="bot", private_key_file="k.pem"))  # fmt: skip
    (config,) = to_configs([entry], "params.servers")
    assert config.oauth is not None
    assert config.oauth.client_secret is None
