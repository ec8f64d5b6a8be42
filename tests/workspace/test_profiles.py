"""Automation profiles: the table, custom profiles, and ProfilePolicy's decisions."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from cleveragents.tool import PermissionQuery, ToolActorContext, ToolAnnotations, ToolSpec
from cleveragents.workspace import (
    BUILTIN_PROFILES,
    DEFAULT_PROFILE,
    AutomationProfile,
    ProfileError,
    ProfilePolicy,
    ShellTool,
    get_profile,
    profiles,
)

OBJECT: dict[str, Any] = {"type": "object"}


@pytest.fixture(autouse=True)
def _as_a_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """These decisions are a user's: as root, an unconfined shell is refused by every
    profile that does not opt in (test_shell_as_root.py), whoever runs the tests."""
    monkeypatch.setattr(profiles, "running_as_root", lambda: False)


def tool(name: str, kind: str | None = None, **kw: Any) -> ToolSpec:
    return ToolSpec(name, name, OBJECT, lambda inputs: None, kind=kind, **kw)  # type: ignore[arg-type]


READER = tool("t/read", annotations=ToolAnnotations(read_only=True))
WRITER = tool("t/write", "write")
RUNNER = tool("t/run", "execute")
SHELL = tool("builtin/shell", "execute")


def query(spec: ToolSpec) -> PermissionQuery:
    return PermissionQuery(spec, {}, "call-1", 1, ToolActorContext(sandbox_root="/ws"))


class Asker:
    """A scripted permission prompt that records what it was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, q: PermissionQuery, reason: str) -> str:
        self.asked.append((q.spec.name, reason))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def decide(policy: ProfilePolicy, spec: ToolSpec) -> str | None:
    result = policy.authorize(query(spec))
    if inspect.isawaitable(result):
        answer: str | None = asyncio.run(asyncio.wait_for(_wrap(result), 5))
        return answer
    return result


async def _wrap(awaitable: Any) -> Any:
    return await awaitable


def outcome(profile: str, spec: ToolSpec, *, confined: bool) -> str:
    asker = Asker("allow_once")
    refusal = decide(ProfilePolicy(profile, asker, lambda: confined), spec)
    if asker.asked:
        return "ask"
    return "allow" if refusal is None else "deny"


# ----------------------------------------------------------------------------- the table

TABLE = {
    # name:       read     write    execute  shell(confined) shell(unconfined)
    "manual": ("ask", "ask", "ask", "ask", "ask"),
    "review": ("allow", "deny", "deny", "deny", "deny"),
    "supervised": ("allow", "ask", "ask", "ask", "ask"),
    "cautious": ("allow", "ask", "deny", "deny", "deny"),
    "trusted": ("allow", "allow", "ask", "ask", "ask"),
    "auto": ("allow", "allow", "allow", "allow", "ask"),
    "ci": ("allow", "allow", "allow", "allow", "deny"),
    "full-auto": ("allow", "allow", "allow", "allow", "allow"),
}


def test_the_built_in_profiles_are_exactly_the_eight_documented_ones() -> None:
    assert list(BUILTIN_PROFILES) == list(TABLE)
    assert DEFAULT_PROFILE == "supervised"


@pytest.mark.parametrize("name", list(TABLE))
def test_each_profile_decides_as_its_table_row_says(name: str) -> None:
    row = (
        outcome(name, READER, confined=True),
        outcome(name, WRITER, confined=True),
        outcome(name, RUNNER, confined=True),
        outcome(name, SHELL, confined=True),
        outcome(name, SHELL, confined=False),
    )
    assert row == TABLE[name]


def test_an_unknown_profile_lists_the_valid_names() -> None:
    with pytest.raises(ProfileError) as info:
        get_profile("yolo")
    assert info.value.code == ProfileError.code
    for name in TABLE:
        assert name in info.value.message


def test_a_client_tool_without_annotations_counts_as_write() -> None:
    client_tool = tool("client/open-editor")
    assert outcome("trusted", client_tool, confined=True) == "allow"
    assert outcome("cautious", client_tool, confined=True) == "ask"


# ----------------------------------------------------------------------------- custom


def test_a_custom_profile_is_parsed_from_a_mapping() -> None:
    custom = {"docs-only": {"read": "allow", "write": "ask", "execute": "deny", "never_ask": True}}
    profile = get_profile("docs-only", custom)
    assert profile == AutomationProfile("docs-only", "allow", "ask", "deny", never_ask=True)


@pytest.mark.parametrize(
    ("fields", "culprit"),
    [
        ({"read": "allow", "write": "ask"}, "execute"),
        ({"read": "allow", "write": "ask", "execute": "maybe"}, "execute"),
        ({"read": "allow", "write": "ask", "execute": "deny", "shell": "x"}, "shell"),
        ({"read": "allow", "write": "ask", "execute": "deny", "never_ask": "yes"}, "never_ask"),
    ],
)
def test_a_malformed_custom_profile_is_an_error_naming_it_and_its_culprit(
    fields: dict[str, Any], culprit: str
) -> None:
    with pytest.raises(ProfileError) as info:
        get_profile("mine", {"mine": fields})
    assert info.value.code == ProfileError.code
    assert "'mine'" in info.value.message
    assert culprit in info.value.message


def test_a_custom_profile_cannot_replace_a_built_in_one() -> None:
    with pytest.raises(ProfileError) as info:
        get_profile("ci", {"ci": {"read": "allow", "write": "allow", "execute": "allow"}})
    assert info.value.code == ProfileError.code
    assert "'ci'" in info.value.message


def test_custom_names_are_listed_among_the_valid_ones() -> None:
    custom = {"mine": {"read": "allow", "write": "allow", "execute": "deny"}}
    with pytest.raises(ProfileError) as info:
        get_profile("other", custom)
    assert info.value.code == ProfileError.code
    assert "mine" in info.value.message


# ----------------------------------------------------------------------------- asking


def test_ci_never_asks() -> None:
    asker = Asker("allow_always")
    policy = ProfilePolicy("ci", asker, lambda: False)
    assert decide(policy, WRITER) is None
    refusal = decide(policy, SHELL)
    assert refusal is not None
    assert "requires a confined shell" in refusal
    assert asker.asked == []


def test_a_profile_that_never_asks_denies_what_it_would_ask() -> None:
    profile = AutomationProfile("quiet", "allow", "ask", "deny", never_ask=True)
    refusal = decide(ProfilePolicy(profile, Asker("allow_once")), WRITER)
    assert refusal is not None
    assert "never asks" in refusal


def test_a_deny_names_the_profile_and_the_kind() -> None:
    refusal = decide(ProfilePolicy("cautious"), RUNNER)
    assert refusal == "profile 'cautious' denies execute tools: t/run was not run"


def test_without_a_permission_prompt_an_ask_is_refused_with_the_reason() -> None:
    refusal = decide(ProfilePolicy("supervised"), WRITER)
    assert refusal is not None
    assert "did not declare the permissions capability" in refusal
    assert "'supervised'" in refusal


def test_allow_always_is_remembered_for_that_tool_only() -> None:
    asker = Asker("allow_always")
    policy = ProfilePolicy("manual", asker)
    assert decide(policy, WRITER) is None
    assert decide(policy, WRITER) is None
    assert decide(policy, READER) is None
    assert [name for name, _ in asker.asked] == ["t/write", "t/read"]


def test_reject_always_is_remembered_and_says_declined() -> None:
    asker = Asker("reject_always")
    policy = ProfilePolicy("supervised", asker)
    first, second = decide(policy, WRITER), decide(policy, WRITER)
    assert first is not None
    assert second is not None
    assert "declined" in first
    assert "declined" in second
    assert len(asker.asked) == 1


def test_reject_once_is_not_remembered() -> None:
    asker = Asker("reject_once", "allow_once")
    policy = ProfilePolicy("supervised", asker)
    assert decide(policy, WRITER) == "the user declined t/write"
    assert decide(policy, WRITER) is None
    assert len(asker.asked) == 2


def test_an_unknown_answer_refuses_the_call() -> None:
    refusal = decide(ProfilePolicy("manual", Asker("sure")), READER)
    assert refusal is not None
    assert "not understood" in refusal


def test_a_separate_policy_forgets_earlier_answers() -> None:
    decide(ProfilePolicy("manual", Asker("allow_always")), WRITER)
    asker = Asker("allow_once")
    decide(ProfilePolicy("manual", asker), WRITER)
    assert len(asker.asked) == 1


# ----------------------------------------------------------------------------- the shell


def test_auto_asks_before_an_unconfined_shell_and_says_why() -> None:
    asker = Asker("allow_once")
    assert decide(ProfilePolicy("auto", asker, lambda: False), SHELL) is None
    [(name, reason)] = asker.asked
    assert name == "builtin/shell"
    assert "UNCONFINED" in reason


def test_the_ask_for_a_shell_says_when_it_is_unconfined() -> None:
    asker = Asker("allow_once")
    decide(ProfilePolicy("supervised", asker, lambda: False), SHELL)
    assert "UNCONFINED" in asker.asked[0][1]


def test_the_policy_uses_the_shell_tools_own_probe_by_default() -> None:
    unconfined = ShellTool(bwrap=None).spec()
    refusal = decide(ProfilePolicy("ci"), unconfined)
    assert refusal is not None
    assert "requires a confined shell" in refusal


def test_an_async_confinement_probe_is_awaited() -> None:
    async def confined() -> bool:
        return True

    assert decide(ProfilePolicy("ci", None, confined), SHELL) is None


def test_full_auto_allows_an_unconfined_shell() -> None:
    assert decide(ProfilePolicy("full-auto", None, lambda: False), SHELL) is None


def test_an_unknown_profile_name_fails_at_construction() -> None:
    with pytest.raises(ProfileError):
        ProfilePolicy("nope")


def test_a_tool_both_read_only_and_destructive_gets_the_write_decision() -> None:
    from cleveragents.tool import PermissionQuery, ToolActorContext, ToolAnnotations, ToolSpec

    spec = ToolSpec(
        name="client.wipe", description="", input_schema={"type": "object"},
        handler=lambda inputs: None,
        annotations=ToolAnnotations(read_only=True, destructive=True),
    )  # fmt: skip
    query = PermissionQuery(spec, {}, "c1", 0, ToolActorContext())
    refusal = ProfilePolicy("review").authorize(query)
    assert isinstance(refusal, str)
    assert "denies write tools" in refusal
