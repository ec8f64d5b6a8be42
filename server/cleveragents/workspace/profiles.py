"""Automation profiles: which tool kinds run, which are asked about, which are refused.

A profile maps each tool kind (``spec.kind``: ``read``, ``write`` or ``execute``; a
client tool without annotations counts as ``write``) to ``allow``, ``ask`` or ``deny``.
Two flags refine it: ``requires_confined_shell`` (an unconfined ``builtin/shell`` is
never allowed outright: ``allow`` becomes ``ask``) and ``never_ask`` (what would be asked
is denied; nobody is waiting to answer). A third, ``unconfined_root``, is off in every
built-in profile: while the daemon runs as root, an unconfined ``builtin/shell`` is
refused outright (never asked), since it would act as root on the whole machine; only
a custom profile that sets ``unconfined_root: true`` lets it run.

| profile    | read  | write | execute | unconfined shell | never asks | meaning              |
|------------|-------|-------|---------|------------------|------------|----------------------|
| manual     | ask   | ask   | ask     | ask              | no         | every call asked     |
| review     | allow | deny  | deny    | deny             | no         | read-only            |
| supervised | allow | ask   | ask     | ask              | no         | the default          |
| cautious   | allow | ask   | deny    | deny             | no         | no commands          |
| trusted    | allow | allow | ask     | ask              | no         | commands asked       |
| auto       | allow | allow | allow   | ask              | no         | free when confined   |
| ci         | allow | allow | allow   | deny             | yes        | unattended           |
| full-auto  | allow | allow | allow   | allow            | no         | everything           |

:class:`ProfilePolicy` implements :class:`~cleveragents.tool.ToolPolicy` on top of a
profile. ``ask`` is the client's permission prompt (the daemon's ``permission/request``);
without one, whatever would be asked is refused with a reason saying the client did not
declare the permissions capability. ``*_always`` answers are remembered per tool name for
the life of the policy object: make one policy per run.

This module knows nothing of the transport or of how a shell is confined; it asks the
tool (``spec.metadata["confinement"]``) or the ``shell_confined`` callable.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import get_args

import attrs

from cleveragents.tool import Decision, PermissionQuery, ToolKind, ToolSpec

from ._errors import ProfileError
from ._setid import running_as_root

AskCallback = Callable[[PermissionQuery, str], Awaitable[str]]
"""``ask(query, reason)`` returns a :data:`~cleveragents.tool.PermissionOutcome`, or
:class:`NotAsked`."""


class NotAsked(str):
    """What ``ask`` answers when nobody could be asked (a command with no terminal): the
    call is refused with this text as its reason, not recorded as a user's decision."""


ConfinementProbe = Callable[[], bool | Awaitable[bool]]

SHELL_TOOL_NAME = "builtin/shell"
DEFAULT_PROFILE = "supervised"

_DECISIONS: tuple[str, ...] = get_args(Decision)
_KINDS: tuple[str, ...] = get_args(ToolKind)
_FLAGS = ("requires_confined_shell", "never_ask", "unconfined_root")


def _decision(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in _DECISIONS:
        raise ProfileError(
            f"profile {attribute.name} must be one of {', '.join(_DECISIONS)}, not {value!r}"
        )


@attrs.define(frozen=True, slots=True)
class AutomationProfile:
    """What a run may do without asking; see the module docstring for the table."""

    name: str
    read: Decision = attrs.field(validator=_decision)
    write: Decision = attrs.field(validator=_decision)
    execute: Decision = attrs.field(validator=_decision)
    requires_confined_shell: bool = False
    never_ask: bool = False
    unconfined_root: bool = False
    """Let ``builtin/shell`` run unconfined while the daemon runs as root (else refused)."""
    description: str = ""

    def decision(self, kind: ToolKind) -> Decision:
        """The profile's answer for a kind, before ``never_ask`` and confinement apply."""
        value: Decision = getattr(self, kind)
        return value


BUILTIN_PROFILES: Mapping[str, AutomationProfile] = {
    p.name: p
    for p in (
        AutomationProfile("manual", "ask", "ask", "ask", description="every call is asked"),
        AutomationProfile("review", "allow", "deny", "deny", description="read-only"),
        AutomationProfile(
            "supervised", "allow", "ask", "ask", description="reads free, changes asked"
        ),
        AutomationProfile(
            "cautious", "allow", "ask", "deny", description="edits asked, commands refused"
        ),
        AutomationProfile(
            "trusted", "allow", "allow", "ask", description="edits free, commands asked"
        ),
        AutomationProfile(
            "auto",
            "allow",
            "allow",
            "allow",
            requires_confined_shell=True,
            description="all free; an unconfined shell is asked",
        ),
        AutomationProfile(
            "ci",
            "allow",
            "allow",
            "allow",
            requires_confined_shell=True,
            never_ask=True,
            description="unattended: never asks; an unconfined shell is refused",
        ),
        AutomationProfile(
            "full-auto", "allow", "allow", "allow", description="everything, even unconfined"
        ),
    )
}


def parse_profile(name: str, fields: Mapping[str, object]) -> AutomationProfile:
    """Build a custom profile from ``{"read": ..., "write": ..., "execute": ...}``.

    Optional keys: ``requires_confined_shell``, ``never_ask`` and ``unconfined_root``
    (booleans), ``description``. Unknown keys and missing kinds are errors.
    """
    if not isinstance(fields, Mapping):
        raise ProfileError(f"custom profile {name!r} must be a mapping")
    unknown = sorted(set(fields) - {*_KINDS, *_FLAGS, "description"})
    if unknown:
        raise ProfileError(f"custom profile {name!r} has unknown keys: {', '.join(unknown)}")
    missing = [kind for kind in _KINDS if kind not in fields]
    if missing:
        raise ProfileError(f"custom profile {name!r} is missing: {', '.join(missing)}")
    decisions: dict[str, str] = {}
    for kind in _KINDS:
        value = fields[kind]
        if not isinstance(value, str) or value not in _DECISIONS:
            raise ProfileError(
                f"custom profile {name!r}: {kind} must be one of {', '.join(_DECISIONS)}, "
                f"not {value!r}"
            )
        decisions[kind] = value
    flags: dict[str, bool] = {}
    for flag in _FLAGS:
        value = fields.get(flag, False)
        if not isinstance(value, bool):
            raise ProfileError(f"custom profile {name!r}: {flag} must be a boolean")
        flags[flag] = value
    description = fields.get("description", "")
    return AutomationProfile(
        name,
        read=decisions["read"],  # type: ignore[arg-type]
        write=decisions["write"],  # type: ignore[arg-type]
        execute=decisions["execute"],  # type: ignore[arg-type]
        requires_confined_shell=flags["requires_confined_shell"],
        never_ask=flags["never_ask"],
        unconfined_root=flags["unconfined_root"],
        description=str(description),
    )


def get_profile(
    name: str, custom: Mapping[str, Mapping[str, object]] | None = None
) -> AutomationProfile:
    """The profile called ``name``: a built-in one, or one from ``custom``.

    Raises :class:`ProfileError` listing the valid names when there is none, and when a
    custom profile would replace a built-in one.
    """
    custom = custom or {}
    if name in custom:
        if name in BUILTIN_PROFILES:
            raise ProfileError(f"custom profile {name!r} would replace a built-in profile")
        return parse_profile(name, custom[name])
    profile = BUILTIN_PROFILES.get(name)
    if profile is None:
        valid = [*BUILTIN_PROFILES, *sorted(custom)]
        raise ProfileError(
            f"unknown automation profile {name!r}; valid profiles: {', '.join(valid)}"
        )
    return profile


class ProfilePolicy:
    """A :class:`~cleveragents.tool.ToolPolicy` applying one profile for one run.

    ``shell_confined`` says whether a shell tool would run confined; when omitted, the
    tool's own ``spec.metadata["confinement"]`` probe is used (``ShellTool`` sets it),
    and a shell tool with neither counts as unconfined.
    """

    def __init__(
        self,
        profile: AutomationProfile | str = DEFAULT_PROFILE,
        ask: AskCallback | None = None,
        shell_confined: ConfinementProbe | None = None,
    ) -> None:
        self.profile = get_profile(profile) if isinstance(profile, str) else profile
        self._ask = ask
        self._shell_confined = shell_confined
        self._remembered: dict[str, bool] = {}

    def authorize(self, query: PermissionQuery, /) -> str | Awaitable[str | None] | None:
        spec = query.spec
        kind: ToolKind = spec.kind or "write"
        if kind == "read" and spec.annotations.destructive:
            # A tool that says both readOnly and destructive gets the stricter reading.
            kind = "write"
        decision = self.profile.decision(kind)
        name = self.profile.name
        if decision == "deny":
            return f"profile '{name}' denies {kind} tools: {spec.name} was not run"
        if decision == "ask" and self.profile.never_ask:
            return (
                f"profile '{name}' never asks, and it would have asked before {kind} "
                f"tools: {spec.name} was not run"
            )
        probe = self._confinement_probe(spec)
        # As root, a shell's confinement is checked whatever the decision.
        root_check = probe is not None and not self.profile.unconfined_root and running_as_root()
        needs_probe = probe is not None and self.profile.requires_confined_shell
        if decision == "allow" and not root_check and not needs_probe:
            return None
        return self._decide(query, decision, kind, probe)

    def _confinement_probe(self, spec: ToolSpec) -> ConfinementProbe | None:
        """How to learn whether this shell is confined; ``None`` for non-shell tools."""
        from_tool = spec.metadata.get("confinement")
        if spec.name != SHELL_TOOL_NAME and from_tool is None:
            return None
        if self._shell_confined is not None:
            return self._shell_confined
        if callable(from_tool):
            probe: ConfinementProbe = from_tool
            return probe
        return lambda: False

    async def _decide(
        self,
        query: PermissionQuery,
        decision: Decision,
        kind: ToolKind,
        probe: ConfinementProbe | None,
    ) -> str | None:
        spec = query.spec
        name = self.profile.name
        reason = f"profile '{name}' asks before {kind} tools"
        if probe is not None:
            confined = probe()
            if inspect.isawaitable(confined):
                confined = await confined
            if not confined and not self.profile.unconfined_root and running_as_root():
                return (
                    f"{spec.name} would run UNCONFINED (no working bubblewrap) as root, "
                    f"with root's power over the whole machine; profile '{name}' does not "
                    "allow that (a custom profile with unconfined_root: true does): not run"
                )
            if decision == "allow" and (confined or not self.profile.requires_confined_shell):
                return None
            if not confined:
                if decision == "allow" and self.profile.never_ask:
                    return (
                        f"profile '{name}' requires a confined shell, and {spec.name} "
                        "would run unconfined here (no working bubblewrap): not run"
                    )
                if decision == "allow":
                    reason = f"profile '{name}' asks before a shell that is not confined"
                reason += f"; {spec.name} would run UNCONFINED (no working bubblewrap)"
        return await self._ask_user(query, reason)

    async def _ask_user(self, query: PermissionQuery, reason: str) -> str | None:
        tool = query.spec.name
        remembered = self._remembered.get(tool)
        if remembered is True:
            return None
        if remembered is False:
            return f"the user declined {tool} for the rest of this run"
        if self._ask is None:
            return (
                f"{reason}, but the client did not declare the permissions capability, "
                f"so {tool} was not run"
            )
        outcome = await self._ask(query, reason)
        if isinstance(outcome, NotAsked):
            return f"{outcome}; {reason}"
        if outcome == "allow_once":
            return None
        if outcome == "allow_always":
            self._remembered[tool] = True
            return None
        if outcome == "reject_always":
            self._remembered[tool] = False
            return f"the user declined {tool} (and every later call to it in this run)"
        if outcome == "reject_once":
            return f"the user declined {tool}"
        return f"the permission answer {outcome!r} was not understood, so {tool} was not run"
