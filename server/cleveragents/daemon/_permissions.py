"""Automation profiles in the daemon: one ``ProfilePolicy`` per run, asking the editor
through ``permission/request`` when the profile says "ask".

Without the client's ``permissions`` capability, "ask" becomes deny and the record says
why. Cancelling the run cancels a pending request (``$/cancelRequest``). The prompt shows
what the tool will really receive, the context's reserved values included, and says when
the model's own values for them were replaced.

Every call also waits here, before it runs, while the client is not reading
(backpressure): a run's tool outputs are not produced faster than the client takes them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ..protocol import methods as m
from ..protocol import unstructure, wire
from ..tool import PERMISSION_OUTCOMES, PermissionQuery, ToolPolicy
from ..workspace.profiles import DEFAULT_PROFILE, ProfilePolicy, get_profile
from ._peer import Peer, PeerRequestError

if TYPE_CHECKING:
    from ._config import DaemonConfig, PolicyFactory

logger = logging.getLogger(__name__)


def make_policy_factory(config: DaemonConfig, peer: Peer) -> PolicyFactory:
    """The factory ``RunManager`` calls for each run (the profile is checked there, so an
    unknown name fails ``run/start`` before the run exists)."""

    def build(run_id: str, profile_name: str | None) -> ToolPolicy | None:
        profile = get_profile(profile_name or DEFAULT_PROFILE, config.custom_profiles)
        ask = _asker(peer, run_id) if config.client_permissions else None
        return PacedPolicy(ProfilePolicy(profile, ask=ask), peer)

    return build


class PacedPolicy:
    """Waits while the client is not reading, then asks the run's own policy."""

    def __init__(self, inner: ToolPolicy, peer: Peer) -> None:
        self._inner = inner
        self._peer = peer

    async def authorize(self, query: PermissionQuery, /) -> str | None:
        await self._peer.pace()
        refusal = self._inner.authorize(query)
        if isinstance(refusal, Awaitable):
            return await refusal
        return refusal


def _asker(peer: Peer, run_id: str) -> Any:
    async def ask(query: PermissionQuery, reason: str) -> str:
        overridden = query.overridden
        if overridden:
            reason += (
                f"; the model's own {' and '.join(overridden)} "
                f"{'was' if len(overridden) == 1 else 'were'} replaced by the run's"
            )
        inputs = query.inputs if query.inputs is not None else query.arguments
        name = query.spec.name
        params = wire.PermissionRequestParams(run_id, query.call_id, name, inputs, reason)
        msg_id, future = peer.request(m.PERMISSION_REQUEST, unstructure(params))
        try:
            reply = await future
        except asyncio.CancelledError:
            peer.cancel_request(msg_id)
            raise
        except PeerRequestError as exc:
            return _invalid(f"the client answered permission/request with an error: {exc}")
        outcome = reply.get("outcome") if isinstance(reply, dict) else None
        if outcome not in PERMISSION_OUTCOMES:
            return _invalid(f"the client answered permission/request with outcome {outcome!r}")
        return str(outcome)

    return ask


def _invalid(message: str) -> str:
    # Anything but a valid answer is a refusal: never run a tool on a garbled yes.
    logger.warning("%s; treating it as reject_once", message)
    return "reject_once"
