"""A stdio server's stderr log, ``log_dir/NAME.log``, and its tail.

The child writes its stderr straight into the file (an appending descriptor it gets at
spawn), so nothing in the daemon has to drain a pipe: a server flooding stderr can never
block on it, and the loop never copies the bytes. Each start appends a header line;
``tail()`` reads only what the current process wrote after it. A log over
``ROTATE_BYTES`` at a start is moved to ``NAME.log.1`` first, so a chatty server cannot
fill the disk across restarts.

The log lives under the state dir, which a command may reach when the state dir lies
inside a sandbox root, so it is opened as every state file is
(:mod:`cleveragents.statedir`): beneath a descriptor of ``log_dir``, no link followed,
a regular file only, never waited on. A link or a FIFO planted at ``NAME.log`` is
skipped (logged once) and the server's stderr goes nowhere; the daemon never appends
through the link nor blocks opening the FIFO.

The few lines the client itself adds (stdout lines that were not JSON-RPC) go into the
same file, so the tail shows them next to the server's own complaints.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import stat
from pathlib import Path
from typing import BinaryIO

from ..statedir import Folder, StateDir

TAIL_LINES = 20
TAIL_BYTES = 4096
ROTATE_BYTES = 16 * 1024 * 1024


class ServerLog:
    """The log file of one stdio server (``path``), shared by its successive processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._start: int | None = None

    def _folder(self, create: bool) -> Folder | None:
        """``log_dir`` by descriptor, reached without following a link; ``None`` when it
        is missing (and not ``create``) or refused (logged once by the state dir)."""
        parent = self.path.parent
        state = StateDir(parent.parent)
        try:
            return state.folder(parent.name, create=create)
        except OSError:
            return None
        finally:
            state.close()

    def open_for_child(self, what: str) -> BinaryIO | None:
        """Open the log for appending, after a header line naming ``what`` starts; the
        caller hands the file to the child as its stderr, then closes its own copy.
        ``None`` when the name is not a regular file (the child's stderr is dropped)."""
        self._start = None
        folder = self._folder(create=True)
        if folder is None:
            return None
        with folder:
            name = self.path.name
            info = folder.lstat(name)
            if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > ROTATE_BYTES:
                with contextlib.suppress(OSError):
                    os.replace(name, name + ".1", src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
            try:
                fd = folder.open_append(name)
            except OSError:
                return None
        if fd is None:
            return None
        file = os.fdopen(fd, "ab", buffering=0)
        try:
            stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            file.write(f"--- {stamp} starting {what}\n".encode(errors="replace"))
            self._start = file.tell()
        except BaseException:
            file.close()
            raise
        return file

    def note(self, text: str) -> None:
        """Append one line of the client's own (best effort)."""
        folder = self._folder(create=False)
        if folder is None:
            return
        with folder, contextlib.suppress(OSError):
            fd = folder.open_append(self.path.name)
            if fd is not None:
                with os.fdopen(fd, "ab") as file:
                    file.write(text.replace("\n", " ").encode(errors="replace") + b"\n")

    def tail(self) -> str | None:
        """The last ``TAIL_LINES`` lines or ``TAIL_BYTES`` bytes (the smaller) the current
        process wrote; ``None`` when it wrote nothing or never started."""
        if self._start is None:
            return None
        folder = self._folder(create=False)
        if folder is None:
            return None
        try:
            with folder:
                fd = folder.open_read(self.path.name)
            if fd is None:
                return None
            with os.fdopen(fd, "rb") as file:
                size = file.seek(0, os.SEEK_END)
                begin = max(self._start, size - TAIL_BYTES)
                if size <= begin:
                    return None
                file.seek(begin)
                data = file.read(size - begin)
        except OSError:
            return None
        lines = data.rstrip(b"\n").split(b"\n")[-TAIL_LINES:]
        text = b"\n".join(lines).decode(errors="replace")
        return text if text.strip() else None
