"""What a ``--tcp`` connection must do before it is the daemon's client, and what it
costs the daemon until then.

Anyone on the machine can open the port, so nothing an unauthenticated connection
sends reaches the JSON-RPC dispatcher. :meth:`TcpGate.admit` reads exactly one frame,
strictly (no resynchronising, a header part of at most ``max_header`` bytes, a body of
at most ``max_frame``), within ``timeout_s`` of the accept. That frame must be an
``initialize`` request whose ``initializationOptions.token`` is the daemon's token;
anything else (another message, a wrong or missing token, bad framing, a late or
oversized frame) closes the connection with no answer at all.

Guessing is bounded twice: at most ``max_unauthenticated`` connections wait to
authenticate at once (one more is closed at accept), and each peer address (an IPv6
one by its /64) that presented a wrong token waits a delay doubling with each failure
(``first_delay_s``, at most ``max_delay_s``) before its next token is even compared; a
connection from it meanwhile is closed unread. Only a well-formed ``initialize`` counts
as an attempt: garbage costs the daemon at most one small frame and teaches nothing.

This module knows the token and LSP framing; it knows nothing of the dispatcher or
the server (``_transport`` hands the admitted frame on).
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import attrs

logger = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 32
"""The shortest ``--tcp`` token accepted at start-up (``secrets.token_urlsafe(32)`` gives 43)."""


@attrs.frozen
class GateLimits:
    """The bounds on connections that have not authenticated (docs/daemon.md, TCP)."""

    max_frame: int = 64 * 1024
    """The largest first frame body, in bytes (an ``initialize`` is a few hundred)."""
    max_header: int = 1024
    """The largest header part of the first frame, in bytes."""
    timeout_s: float = 5.0
    """From the accept to the end of the first frame."""
    max_unauthenticated: int = 16
    """Connections waiting to authenticate at once; one more is closed at accept."""
    first_delay_s: float = 0.25
    """A peer's wait after its first wrong token; it doubles with each more."""
    max_delay_s: float = 60.0
    max_peers: int = 4096
    """Peers whose failures are remembered; the oldest is forgotten first."""
    forget_after_s: float = 600.0
    """A peer's failures are forgotten this long after its last one."""


class Refused(Exception):
    """Why a connection is closed before it authenticated, in words; ``quiet`` ones
    (a peer that left without a word) are logged at debug level only."""

    def __init__(self, why: str, *, quiet: bool = False) -> None:
        super().__init__(why)
        self.quiet = quiet


class PeerThrottle:
    """Failed token attempts per peer, and how long each must wait before the next."""

    def __init__(self, limits: GateLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self._limits = limits
        self._clock = clock
        # peer -> (failures, time of the last one), oldest failure first
        self._peers: collections.OrderedDict[str, tuple[int, float]] = collections.OrderedDict()

    def delay(self, failures: int) -> float:
        """The wait after ``failures`` wrong tokens (0 for none)."""
        if failures < 1:
            return 0.0
        limits = self._limits
        return min(limits.first_delay_s * 2.0 ** min(failures - 1, 64), limits.max_delay_s)

    def failures(self, peer: str) -> int:
        entry = self._current(peer)
        return 0 if entry is None else entry[0]

    def wait_left(self, peer: str) -> float:
        """Seconds before ``peer`` may present a token again (0: now)."""
        entry = self._current(peer)
        if entry is None:
            return 0.0
        failures, last = entry
        return max(0.0, last + self.delay(failures) - self._clock())

    def failed(self, peer: str) -> float:
        """Count a wrong token from ``peer``; returns the wait it now has."""
        entry = self._current(peer)
        failures = 1 if entry is None else entry[0] + 1
        self._peers.pop(peer, None)
        self._peers[peer] = (failures, self._clock())
        while len(self._peers) > self._limits.max_peers:
            self._peers.popitem(last=False)
        return self.delay(failures)

    def succeeded(self, peer: str) -> None:
        self._peers.pop(peer, None)

    def _current(self, peer: str) -> tuple[int, float] | None:
        entry = self._peers.get(peer)
        if entry is not None and self._clock() - entry[1] > self._limits.forget_after_s:
            del self._peers[peer]
            return None
        return entry


def peer_key(peername: Any) -> str:
    """The address a throttle counts: IPv4 as is, IPv6 by its /64 (one host usually
    holds a whole /64), an IPv4-mapped IPv6 address as the IPv4 one."""
    host = peername[0] if isinstance(peername, tuple) and peername else peername
    try:
        address = ipaddress.ip_address(str(host).partition("%")[0])
    except ValueError:
        return str(host)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


async def read_first_frame(reader: asyncio.StreamReader, limits: GateLimits) -> bytes:
    """One LSP frame, read strictly: ``Refused`` for anything but a header part with one
    ``Content-Length`` within ``max_header`` bytes and a body within ``max_frame``."""
    length: int | None = None
    header_bytes = 0
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            raise Refused("a header line with no end") from None
        except asyncio.IncompleteReadError as exc:
            if exc.partial or header_bytes:
                raise Refused("the connection ended inside the header") from None
            raise Refused("it closed without a word", quiet=True) from None
        header_bytes += len(line)
        if header_bytes > limits.max_header:
            raise Refused(f"a header part over {limits.max_header} bytes")
        text = line.rstrip(b"\r\n")
        if not text:
            break
        name, colon, value = text.partition(b":")
        if not colon:
            raise Refused("a header line that is not NAME: VALUE")
        if name.strip().lower() != b"content-length":
            continue
        value = value.strip(b" \t")
        if not value.isdigit() or len(value) > 12:
            raise Refused("a Content-Length that is not a number")
        if length is not None and int(value) != length:
            raise Refused("two Content-Length headers that disagree")
        length = int(value)
    if length is None:
        raise Refused("no Content-Length")
    if length > limits.max_frame:
        raise Refused(
            f"a first frame of {length} bytes (at most {limits.max_frame} before the token)"
        )
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise Refused("the connection ended inside the body") from None


def presented_token(body: bytes) -> tuple[str | None, str]:
    """The token an ``initialize`` request presents, or ``None`` and why the frame is not
    one. A well-formed ``initialize`` without a token presents ``""``."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None, "not JSON"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    if data.get("jsonrpc") != "2.0" or data.get("method") != "initialize":
        return None, "not an initialize request"
    msg_id = data.get("id")
    if not isinstance(msg_id, str) and (not isinstance(msg_id, int) or isinstance(msg_id, bool)):
        return None, "an initialize without a valid id"
    params = data.get("params")
    if not isinstance(params, dict):
        return None, "an initialize without params"
    options = params.get("initializationOptions")
    token = options.get("token") if isinstance(options, dict) else None
    return (token if isinstance(token, str) else ""), ""


class TokenError(Exception):
    """A ``--tcp`` token that cannot be used: the daemon does not start."""


def check_token(token: str, source: str) -> str:
    """``token`` when it is long enough to resist guessing; ``TokenError`` naming
    ``source`` (where it came from) otherwise."""
    if any(ord(c) < 32 or ord(c) == 127 for c in token):
        raise TokenError(f"{source} holds control characters; a --tcp token must not")
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenError(
            f"{source} is {len(token)} characters long; a --tcp token needs at least "
            f"{MIN_TOKEN_CHARS} (make one with: python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))', or give none and let the daemon create one)"
        )
    return token


def _same(given: str, token: str) -> bool:
    import hmac  # only a --tcp daemon checks a token

    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8"))


class TcpGate:
    """Admits the connections that present the token; closes every other one unanswered."""

    def __init__(
        self,
        token: str,
        limits: GateLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._token = token
        self.limits = limits or GateLimits()
        self.throttle = PeerThrottle(self.limits, clock)
        self.unauthenticated = 0
        """Connections accepted and reading their first frame now."""
        self.closed = 0
        """Connections closed without authenticating, in all."""

    async def admit(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bytes | None:
        """The first frame of a connection that presented the token (the ``initialize`` to
        dispatch), or ``None``: the connection was closed, unanswered."""
        peer = peer_key(writer.get_extra_info("peername"))
        try:
            return await self._admit(reader, peer)
        except Refused as exc:
            self._close(writer, peer, exc)
            return None

    async def _admit(self, reader: asyncio.StreamReader, peer: str) -> bytes:
        limits = self.limits
        if self.unauthenticated >= limits.max_unauthenticated:
            raise Refused(f"{limits.max_unauthenticated} connections already wait to authenticate")
        self._check_wait(peer)
        self.unauthenticated += 1
        try:
            async with asyncio.timeout(limits.timeout_s):
                body = await read_first_frame(reader, limits)
        except TimeoutError:
            raise Refused(f"no whole first frame within {limits.timeout_s:g} s") from None
        except ConnectionError:
            raise Refused("the connection was reset", quiet=True) from None
        finally:
            self.unauthenticated -= 1
        given, why = presented_token(body)
        if given is None:
            raise Refused(f"its first frame is {why}")
        self._check_wait(peer)  # a parallel attempt may have failed meanwhile
        if not given or not _same(given, self._token):
            wait = self.throttle.failed(peer)
            what = "no token" if not given else "a wrong token"
            raise Refused(f"{what} ({self._failures(peer)}; the next is compared after {wait:g} s)")
        self.throttle.succeeded(peer)
        return body

    def _check_wait(self, peer: str) -> None:
        if (left := self.throttle.wait_left(peer)) > 0:
            raise Refused(f"{self._failures(peer)}; {left:.2f} s left to wait")

    def _failures(self, peer: str) -> str:
        count = self.throttle.failures(peer)
        return f"{count} failed attempt{'s' if count != 1 else ''} from {peer}"

    def _close(self, writer: asyncio.StreamWriter, peer: str, refused: Refused) -> None:
        """Close without a word; log why (each of the first 20, then one in 1000: a flood
        of connections must not flood the log too)."""
        self.closed += 1
        writer.close()
        if refused.quiet:
            logger.debug("an unauthenticated TCP connection from %s ended: %s", peer, refused)
        elif self.closed <= 20 or self.closed % 1000 == 0:
            logger.warning(
                "closed an unauthenticated TCP connection from %s: %s (%d closed so far)",
                peer, refused, self.closed,
            )  # fmt: skip
