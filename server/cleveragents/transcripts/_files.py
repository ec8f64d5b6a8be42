"""One transcript file: its name, its lines, and the lock that says its run is live.

A run's transcript is ``STATE_DIR/runs/RUN_ID.jsonl``. Each line is
``{"method": ..., "params": ...}``, written in ``write`` calls on an ``O_APPEND``
descriptor (no user-space buffer), so a crash loses at most the line being written.

The file is created and exclusively ``flock``-ed under a temporary name, then hard-linked
into place (``link`` fails if the name exists, like ``O_EXCL``), so no reader ever sees it
unlocked while its run is live; where hard links are not supported it falls back to
``O_CREAT | O_EXCL`` on the final name. The lock is held until ``Transcript.close()``:
any reader, in any process, learns whether a run is live from it (:func:`locked`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

RUN_ID_PATTERN = re.compile(r"\A[A-Za-z0-9._-]{1,128}\Z")
"""Anchored on the whole string (``\\Z``: no trailing newline); prefer ``valid_run_id``,
which also refuses ``.`` and ``..``."""
SUFFIX = ".jsonl"


def valid_run_id(run_id: str) -> bool:
    """Whether ``run_id`` may name a run: 1-128 of ``A-Za-z0-9._-``, not ``.`` or ``..``."""
    return RUN_ID_PATTERN.fullmatch(run_id) is not None and run_id not in (".", "..")


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "cleveragents"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decode = json.JSONDecoder(parse_constant=_no_constants).decode

_METHOD_TEXT: dict[str, str] = {}


def parse_line(raw: bytes) -> dict[str, Any] | None:
    """One transcript line as an event, or None for anything unreadable (not UTF-8, not
    JSON, ``NaN``, nested too deep, not an object with object params)."""
    try:
        event = _decode(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        return None
    if isinstance(event, dict) and isinstance(event.get("params"), dict):
        return event
    return None


def os_text(exc: OSError) -> str:
    if exc.errno is not None and exc.strerror:
        return f"[Errno {exc.errno}] {exc.strerror}"
    return str(exc)


class Transcript:
    """The open transcript of one active run; holds the run id's lock until ``close()``.

    A write that fails (a full disk, a read-only state dir) never raises: ``error`` keeps
    the ``OSError``, later writes are no-ops, and ``failure_message()`` says why."""

    __slots__ = ("_fd", "_on_close", "error", "path", "state_dir")

    def __init__(
        self, path: Path, fd: int | None, state_dir: Path, error: OSError | None = None
    ) -> None:
        self.path = path
        self.state_dir = state_dir
        self._fd = fd
        self.error: OSError | None = error
        self._on_close: list[Callable[[], None]] = []

    def append(self, method: str, params: Any) -> None:
        self.append_raw(method, json.dumps(params, ensure_ascii=False, separators=(",", ":")))

    def append_raw(self, method: str, params_text: str) -> None:
        """Append a line whose params are already JSON text (serialised once per event).
        After a failed write nothing more is written: the file keeps its lock, so the run
        still reads as live elsewhere, and ``error`` says what went wrong."""
        if self._fd is None or self.error is not None:
            return
        method_text = _METHOD_TEXT.get(method)
        if method_text is None:  # a handful of methods: each one's JSON text made once
            method_text = _METHOD_TEXT.setdefault(method, json.dumps(method))
        line = f'{{"method":{method_text},"params":{params_text}}}\n'
        # A lone surrogate cannot be UTF-8; as a \\uXXXX escape it is still the same JSON.
        data = memoryview(line.encode("utf-8", "backslashreplace"))
        try:
            while data:
                written = os.write(self._fd, data)
                data = data[written:]
        except OSError as exc:
            self.error = exc
            logger.warning("cannot write transcript %s: %s", self.path, os_text(exc))

    def failure_message(self) -> str | None:
        """Why the transcript cannot be written, naming the state dir; None when it can."""
        if self.error is None:
            return None
        return f"cannot write transcript in {self.state_dir}: {os_text(self.error)}"

    def on_close(self, callback: Callable[[], None]) -> None:
        self._on_close.append(callback)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()


def create_locked(path: Path) -> int:
    """Create ``path`` exclusively, locked; ``FileExistsError`` when the name is taken."""
    temp = path.with_name(f".claim-{uuid.uuid4().hex}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh inode: never contended
        try:
            os.link(temp, path)  # atomic and exclusive: EEXIST if the id is taken
        except FileExistsError:
            raise
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            os.close(fd)  # no hard links here: exclusive create, then lock
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def locked(path: Path) -> bool:
    """Whether some writer holds the file's exclusive lock (any process, this one too)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # also drops our shared lock when we got it
    return False


def int_field(value: Any) -> int:
    """An integer field of a line, 0 when absent or not an integer (``true`` is not)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
