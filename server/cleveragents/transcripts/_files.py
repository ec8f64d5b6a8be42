"""One transcript file: its name, its lines, and the lock that says its run is live.

A run's transcript is ``STATE_DIR/runs/RUN_ID.jsonl``. Each line is
``{"method": ..., "params": ...}``, written in ``write`` calls on an ``O_APPEND``
descriptor (no user-space buffer), so a crash loses at most the line being written.

The file is created and exclusively ``flock``-ed under a temporary name, then hard-linked
into place (``link`` fails if the name exists, like ``O_EXCL``), so no reader ever sees it
unlocked while its run is live; where hard links are not supported it falls back to
``O_CREAT | O_EXCL`` on the final name. The lock is held until ``Transcript.close()``:
any reader, in any process, learns whether a run is live from it (:func:`locked`).

Everything is opened beneath the ``runs`` folder's descriptor (:mod:`cleveragents.statedir`):
a link, a FIFO or a device planted at a transcript's name is skipped, never followed nor
waited on, and a line is read back only up to :data:`MAX_LINE_BYTES`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from ..protocol import MAX_BODY
from ..statedir import NO_FOLLOW, Folder, read_lines

logger = logging.getLogger(__name__)

RUN_ID_PATTERN = re.compile(r"\A[A-Za-z0-9._-]{1,128}\Z")
"""Anchored on the whole string (``\\Z``: no trailing newline); prefer ``valid_run_id``,
which also refuses ``.`` and ``..``."""
SUFFIX = ".jsonl"
MAX_LINE_BYTES = MAX_BODY
"""The longest transcript line read back: a line is one notification's params, and no
notification longer than a frame (64 MiB) was ever sent. A longer line is skipped as it
is read, like a torn one (a planted file of one endless line costs no more memory)."""


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


def lines(handle: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The events of an open transcript (binary); unreadable or over-long lines skipped."""
    for raw in read_lines(handle, MAX_LINE_BYTES):
        event = parse_line(raw) if raw is not None else None
        if event is not None:
            yield event


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


def create_locked(runs: Folder, name: str) -> int:
    """Create ``name`` in ``runs`` exclusively, locked; ``FileExistsError`` when the name
    is taken (by anything: a link planted there included)."""
    temp = f".claim-{uuid.uuid4().hex}.tmp"
    fd = runs.create(temp, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh inode: never contended
        try:
            runs.link(temp, name)  # atomic and exclusive: EEXIST if the id is taken
        except FileExistsError:
            raise
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            os.close(fd)  # no hard links here: exclusive create, then lock
            fd = runs.create(name, os.O_WRONLY | os.O_APPEND)
            fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    finally:
        with contextlib.suppress(OSError):
            runs.unlink(temp)


def locked(runs: Folder, name: str) -> bool:
    """Whether some writer holds the lock of the transcript ``name`` (any process, this
    one too); never waits (a FIFO or a link at the name is no live run)."""
    try:
        fd = os.open(name, os.O_RDONLY | NO_FOLLOW | os.O_NONBLOCK, dir_fd=runs.fd)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
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
