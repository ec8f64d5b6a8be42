"""Model specs: the accepted forms, their errors, and where a run's model comes from."""

from __future__ import annotations

import pytest

from cleveragents.llm.errors import ModelConfigError
from cleveragents.llm.spec import ModelSpec, parse_model_spec, resolve_model_spec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("scripted:turns.json", ModelSpec("scripted", path="turns.json")),
        ("openai:gpt-4o-mini", ModelSpec("openai", model="gpt-4o-mini")),
        ("anthropic:claude-x", ModelSpec("anthropic", model="claude-x")),
        ("gemini:gemini-2.5-flash", ModelSpec("gemini", model="gemini-2.5-flash")),
        ("client", ModelSpec("client")),
        ("openai:org/model:tag", ModelSpec("openai", model="org/model:tag")),
    ],
)
def test_string_specs_parse(text: str, expected: ModelSpec) -> None:
    assert parse_model_spec(text) == expected


def test_the_object_form_takes_base_url_and_key_env() -> None:
    spec = parse_model_spec({"provider": "openai", "model": "llama3", "baseUrl": "http://127.0.0.1:11434/v1",
                             "apiKeyEnv": "LOCAL_KEY", "maxTokens": 100, "temperature": 0.2,
                             "timeoutMs": 1500, "maxRetries": 1})  # fmt: skip
    assert spec == ModelSpec("openai", model="llama3", base_url="http://127.0.0.1:11434/v1",
                             api_key_env="LOCAL_KEY", max_tokens=100, temperature=0.2,
                             timeout_s=1.5, max_retries=1)  # fmt: skip


def test_media_false_marks_a_text_only_model_and_anything_but_a_boolean_is_refused() -> None:
    assert parse_model_spec({"provider": "openai", "model": "m"}).media is True
    assert parse_model_spec({"provider": "openai", "model": "m", "media": False}).media is False
    with pytest.raises(ModelConfigError, match="'media' must be true or false"):
        parse_model_spec({"provider": "openai", "model": "m", "media": "no"})


@pytest.mark.parametrize(
    "bad",
    ["cohere:command", "openai:", "nonsense", 42, {"provider": "nope"}, {"provider": "openai"},
     {"provider": "gemini"},
     {"provider": "scripted"}, {"provider": "openai", "model": "m", "extra": 1},
     {"provider": "openai", "model": 3}],
)  # fmt: skip
def test_malformed_specs_name_the_accepted_forms(bad: object) -> None:
    with pytest.raises(ModelConfigError) as info:
        parse_model_spec(bad)
    assert info.value.code == -32020
    assert "model" in info.value.message


def test_the_key_comes_from_the_environment_and_never_sits_in_the_spec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default")
    monkeypatch.setenv("MY_KEY", "sk-mine")
    assert ModelSpec("openai", model="m").api_key() == "sk-default"
    spec = ModelSpec("openai", model="m", api_key_env="MY_KEY")
    assert spec.api_key() == "sk-mine"
    assert "sk-mine" not in repr(spec)
    assert spec.describe() == "openai:m"


def test_the_object_form_names_gemini_too() -> None:
    spec = parse_model_spec({"provider": "gemini", "model": "gemini-2.5-flash", "maxTokens": 64})
    assert spec == ModelSpec("gemini", model="gemini-2.5-flash", max_tokens=64)


def test_a_gemini_key_comes_from_google_api_key_first_then_gemini_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = ModelSpec("gemini", model="m")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    assert (spec.api_key(), spec.key_env()) == (None, "GOOGLE_API_KEY or GEMINI_API_KEY")
    monkeypatch.setenv("GEMINI_API_KEY", "g-gemini")
    assert (spec.api_key(), spec.key_env()) == ("g-gemini", "GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_API_KEY", "g-google")
    assert (spec.api_key(), spec.key_env()) == ("g-google", "GOOGLE_API_KEY")
    mine = ModelSpec("gemini", model="m", api_key_env="MY_KEY")
    assert (mine.api_key(), mine.key_env()) == (None, "MY_KEY")


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("sk-pasted\r\n", "sk-pasted"),
        ("  sk-padded\t", "sk-padded"),
        ("sk-wrap\r\nped", "sk-wrapped"),
        ("\r\n", None),
        ("   ", None),
        ("", None),
    ],
)
def test_keys_lose_line_ends_and_surrounding_blanks_and_blank_keys_are_unset(
    monkeypatch: pytest.MonkeyPatch, raw: str, key: str | None
) -> None:
    monkeypatch.setenv("MY_KEY", raw)
    assert ModelSpec("openai", model="m", api_key_env="MY_KEY").api_key() == key


def test_precedence_is_run_then_initialize_then_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLEVERAGENTS_MODEL", "openai:from-env")
    assert resolve_model_spec("openai:from-run", "openai:from-init").model == "from-run"
    assert resolve_model_spec(None, "openai:from-init").model == "from-init"
    assert resolve_model_spec(None, None).model == "from-env"


def test_no_model_anywhere_says_how_to_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLEVERAGENTS_MODEL", raising=False)
    with pytest.raises(ModelConfigError, match="CLEVERAGENTS_MODEL"):
        resolve_model_spec(None, None)
