"""The key store behind ``cleveragents keys``, in process: the OS keyring through a fake
backend set as keyring allows, else a 0600 file in a 0700 folder that is refused when
others can read it; and the model layer's key-source hook, after the environment."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest

from cleveragents._keystore import (
    FileStore,
    Keys,
    KeyStoreError,
    file_store,
    key_source,
    keyring_store,
    keys_installed,
)
from cleveragents.llm import ModelConfigError, create_caller, parse_model_spec
from cleveragents.llm.spec import KeySource, set_key_source
from kit.fake_keyring import MemoryKeyring

KEY = "sk-test-0123456789abcdefghijKLMNOP"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private config dir, and no key in the environment."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "config" / "cleveragents"


@pytest.fixture
def fake_keyring() -> Iterator[MemoryKeyring]:
    """keyring's backend, set programmatically for this test, then put back."""
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


# -- the file store ---------------------------------------------------------------------


def test_the_file_store_keeps_keys_0600_in_a_0700_folder(config: Path) -> None:
    store = file_store()
    assert store.path == config / "keys.json"
    store.set("OPENAI_API_KEY", KEY)
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.stat().st_mode) == 0o700
    assert FileStore(store.path).get("OPENAI_API_KEY") == KEY
    assert [p.name for p in config.iterdir()] == ["keys.json"]  # no temporary file left
    assert store.remove("OPENAI_API_KEY") is True
    assert not store.path.exists()  # the last key gone, the file too
    assert store.remove("OPENAI_API_KEY") is False


def test_a_key_file_others_can_read_is_refused_saying_how_to_fix_it(config: Path) -> None:
    store = file_store()
    store.set("OPENAI_API_KEY", KEY)
    store.path.chmod(0o644)
    with pytest.raises(KeyStoreError) as caught:
        store.get("OPENAI_API_KEY")
    message = str(caught.value)
    assert "can be read by others (mode 0644)" in message
    assert f"chmod 600 {store.path}" in message
    assert KEY not in message


def test_a_linked_or_foreign_key_file_is_refused(config: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_text(json.dumps({"version": 1, "keys": {"OPENAI_API_KEY": KEY}}))
    elsewhere.chmod(0o600)
    config.mkdir(parents=True)
    (config / "keys.json").symlink_to(elsewhere)
    with pytest.raises(KeyStoreError, match="symbolic link"):
        file_store().get("OPENAI_API_KEY")


def test_a_key_file_that_is_not_ours_is_refused_without_quoting_it(config: Path) -> None:
    config.mkdir(parents=True)
    path = config / "keys.json"
    path.write_text(f"OPENAI_API_KEY={KEY}\n")
    path.chmod(0o600)
    with pytest.raises(KeyStoreError) as caught:
        file_store().get("OPENAI_API_KEY")
    assert "is not one cleveragents wrote" in str(caught.value)
    assert KEY not in str(caught.value)


# -- the keyring ------------------------------------------------------------------------


def test_a_usable_keyring_is_preferred_and_the_file_stays_the_fallback(
    config: Path, fake_keyring: MemoryKeyring
) -> None:
    keys = Keys.default()
    assert keys.preferred.kind == "keyring"
    assert keys.set("OPENAI_API_KEY", KEY).kind == "keyring"
    assert fake_keyring.passwords == {"cleveragents/OPENAI_API_KEY": KEY}
    assert not file_store().path.exists()
    file_store().set("ANTHROPIC_API_KEY", "sk-ant-file-key")  # kept before keyring existed
    assert keys.find("ANTHROPIC_API_KEY") == ("sk-ant-file-key", keys.stores[1])
    assert [s.kind for s in keys.remove("OPENAI_API_KEY")] == ["keyring"]
    assert keys.find("OPENAI_API_KEY") is None


def test_keyring_s_null_backend_means_the_file(config: Path) -> None:
    # conftest names keyring's null backend for every test: it keeps nothing.
    assert keyring_store() is None
    assert Keys.default().preferred.kind == "file"


def test_a_failing_keyring_passes_to_the_file_and_its_error_never_holds_the_key(
    config: Path, fake_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError(f"the collection is locked; you gave {KEY}")

    monkeypatch.setattr(fake_keyring, "set_password", broken)
    monkeypatch.setattr(fake_keyring, "get_password", broken)
    keys = Keys.default()
    with pytest.raises(KeyStoreError) as caught:
        keys.set("OPENAI_API_KEY", KEY)
    assert "did not take the key: RuntimeError: the collection is locked" in str(caught.value)
    assert KEY not in str(caught.value)
    file_store().set("OPENAI_API_KEY", KEY)
    assert keys.find("OPENAI_API_KEY") == (KEY, keys.stores[1])  # past the locked keyring


# -- the model layer's key source --------------------------------------------------------


def test_the_environment_wins_over_a_key_source(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_model_spec("openai:gpt-4o-mini")
    previous = set_key_source(KeySource(lambda name: {"OPENAI_API_KEY": "stored"}.get(name),
                                        stored="stored: here", hint="(or: keep {name})"))  # fmt: skip
    try:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        assert spec.api_key() == "stored"
        assert spec.key_env() == "OPENAI_API_KEY (stored: here)"
        monkeypatch.setenv("OPENAI_API_KEY", " from-env\n")
        assert spec.api_key() == "from-env"
        assert spec.key_env() == "OPENAI_API_KEY"
        monkeypatch.delenv("OPENAI_API_KEY")
        other = parse_model_spec("anthropic:claude-sonnet-4-5")
        assert other.api_key() is None
        assert other.key_env() == "ANTHROPIC_API_KEY (or: keep anthropic)"
        own = parse_model_spec({"provider": "openai", "model": "m", "apiKeyEnv": "MY_KEY"})
        assert own.key_env() == "MY_KEY (or: keep MY_KEY)"
    finally:
        set_key_source(previous)
    assert parse_model_spec("openai:gpt-4o-mini").api_key() is None  # put back: env only


def test_a_model_finds_a_stored_key_and_the_environment_never_gets_it(
    config: Path, fake_keyring: MemoryKeyring
) -> None:
    pytest.importorskip("openai")
    spec = parse_model_spec("openai:gpt-4o-mini")
    with pytest.raises(ModelConfigError, match="set OPENAI_API_KEY"):
        create_caller(spec)  # nothing installed: the environment only
    Keys.default().set("OPENAI_API_KEY", KEY)
    with keys_installed():
        caller = create_caller(spec)  # found in the keyring: no error
        assert spec.api_key() == KEY
        assert KEY not in repr(caller)
    assert KEY not in json.dumps(dict(os.environ))
    with pytest.raises(ModelConfigError):
        create_caller(spec)  # uninstalled when the command ends


def test_a_store_that_cannot_be_read_is_a_model_config_error_naming_it(config: Path) -> None:
    store = file_store()
    store.set("OPENAI_API_KEY", KEY)
    store.path.chmod(0o640)
    source = key_source()
    with pytest.raises(ModelConfigError) as caught:
        source.lookup("OPENAI_API_KEY")
    assert str(store.path) in caught.value.message
    assert KEY not in caught.value.message
