"""The state dir's secret, ``STATE/secret.key``: 32 random bytes, 0600, made on first use.

What the daemon must recognise as its own writing (the run index, ACP session
settings) carries an HMAC keyed by a key derived from it, one per purpose. A file
planted in the state dir (a cloned project's ``.cleveragents/``, a command that could
write there) cannot carry a valid one without the secret.

The secret is used only when it is a regular file of this user's, of exactly 32 bytes,
that no other user may read or write (mode ``0600`` or narrower): anything else at
that name (a link, a file from an archive or a checkout, which git writes 0644) is
replaced by a new secret, and what the old one signed reads as unsigned.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ._files import warn_once, write_all

if TYPE_CHECKING:
    from ._files import Folder, StateDir

SECRET_NAME = "secret.key"
SECRET_BYTES = 32


# hashlib and hmac (OpenSSL: ~3 ms) are imported when a key is first used, never
# before the daemon's initialize reply; a secret's bytes are os.urandom's, as
# secrets.token_bytes's are.


def derive(secret: bytes, purpose: str) -> bytes:
    import hashlib
    import hmac

    return hmac.new(secret, b"cleveragents/" + purpose.encode(), hashlib.sha256).digest()


def sign(key: bytes, data: bytes) -> str:
    """The hex HMAC-SHA256 of ``data``."""
    import hashlib
    import hmac

    return hmac.new(key, data, hashlib.sha256).hexdigest()


def signed(key: bytes, data: bytes, mac: object) -> bool:
    """Whether ``mac`` is ``data``'s HMAC under ``key`` (compared in constant time)."""
    import hmac

    return isinstance(mac, str) and hmac.compare_digest(sign(key, data), mac)


def load_secret(state: StateDir) -> bytes | None:
    """The secret of ``state``, made if missing or unusable; ``None`` when the state dir
    does not exist or it cannot be read nor written."""
    try:
        top = state.folder()
    except OSError:
        return None
    if top is None:
        return None
    with top:
        for _ in range(3):  # another process may make it at the same moment
            try:
                found = _read(top)
                if found is not None:
                    return found
                return _make(top)
            except FileExistsError:
                continue
            except OSError as exc:
                warn_once(top.path / SECRET_NAME, f"cannot be read nor made ({exc})")
                return None
    return None


def _read(top: Folder) -> bytes | None:
    """The secret if it is usable; ``None`` when missing; an unusable one is replaced."""
    info = top.lstat(SECRET_NAME)
    if info is None:
        return None
    fd = top.open_read(SECRET_NAME)
    if fd is not None:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            data = handle.read(SECRET_BYTES + 1)
        if info.st_uid == os.geteuid() and not info.st_mode & 0o077 and len(data) == SECRET_BYTES:
            return data
    warn_once(top.path / SECRET_NAME, "not a 0600 secret of this user's; a new one replaces it")
    top.replace(SECRET_NAME, os.urandom(SECRET_BYTES))
    return _read_made(top)


def _make(top: Folder) -> bytes | None:
    """A new secret, linked in exclusively (``FileExistsError`` when another process
    made one first: that one is read instead)."""
    temp = f".{SECRET_NAME}.{os.urandom(16).hex()}.tmp"
    fd = top.create(temp)
    try:
        try:
            write_all(fd, os.urandom(SECRET_BYTES))
        finally:
            os.close(fd)
        top.link(temp, SECRET_NAME)
    finally:
        with contextlib.suppress(OSError):
            top.unlink(temp)
    return _read_made(top)


def _read_made(top: Folder) -> bytes | None:
    """The secret as it is on disk now (another process's, if it won a race)."""
    fd = top.open_read(SECRET_NAME)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(SECRET_BYTES + 1)
    return data if len(data) == SECRET_BYTES else None
