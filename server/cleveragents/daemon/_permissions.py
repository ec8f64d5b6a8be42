"""Automation profiles in the daemon: one ``ProfilePolicy`` per run, asking the editor
through ``permission/request`` when the profile says "ask".

Without the client's ``permissions`` capability, "ask" becomes deny and the record says
why. Cancelling the run cancels a pending request (``$/cancelRequest``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..protocol import methods as m
from ..tool import PermissionQuery, ToolPolicy
from ..workspace.profiles import DEFAULT_PROFILE, ProfilePolicy, get_profile
from ._peer import Peer, PeerRequestError

if TYPE_CHECKING:
    from ._runs import DaemonConfig, PolicyFactory

logger = logging.getLogger(__name__)

OUTCOMES = ("allow_once", "allow_always", "reject_once", "reject_always")


def make_policy_factory(config: DaemonConfig, peer: Peer) -> PolicyFactory:
    """The factory ``RunManager`` calls for each run (the profile is checked there, so an
    unknown name fails ``run/start`` before the run exists)."""

    def build(run_id: str, profile_name: str | None) -> ToolPolicy | None:
        profile = get_profile(profile_name or DEFAULT_PROFILE, config.custom_profiles)
        ask = _asker(peer, run_id) if config.client_permissions else None
        return ProfilePolicy(profile, ask=ask)

    return build


def _asker(peer: Peer, run_id: str) -> Any:
    async def ask(query: PermissionQuery, reason: str) -> str:
        params = {
            "runId": run_id,
            "callId": query.call_id,
            "toolName": query.spec.name,
            "inputs": query.arguments,
            "reason": reason,
        }
        msg_id, future = peer.request(m.PERMISSION_REQUEST, params)
        try:
            reply = await future
        except asyncio.CancelledError:
            peer.cancel_request(msg_id)
            raise
        except PeerRequestError as exc:
            return _invalid(f"the client answered permission/request with an error: {exc}")
        outcome = reply.get("outcome") if isinstance(reply, dict) else None
        if outcome not in OUTCOMES:
            return _invalid(f"the client answered permission/request with outcome {outcome!r}")
        return str(outcome)

    return ask


def _invalid(message: str) -> str:
    # Anything but a valid answer is a refusal: never run a tool on a garbled yes.
    logger.warning("%s; treating it as reject_once", message)
    return "reject_once"
