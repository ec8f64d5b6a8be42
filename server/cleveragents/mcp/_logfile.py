"""A stdio server's stderr log, ``log_dir/NAME.log``, and its tail.

The child writes its stderr straight into the file (an appending descriptor it gets at
spawn), so nothing in the daemon has to drain a pipe: a server flooding stderr can never
block on it, and the loop never copies the bytes. Each start appends a header line;
``tail()`` reads only what the current process wrote after it. A log over
``ROTATE_BYTES`` at a start is moved to ``NAME.log.1`` first, so a chatty server cannot
fill the disk across restarts.

The few lines the client itself adds (stdout lines that were not JSON-RPC) go into the
same file, so the tail shows them next to the server's own complaints.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from pathlib import Path
from typing import BinaryIO

TAIL_LINES = 20
TAIL_BYTES = 4096
ROTATE_BYTES = 16 * 1024 * 1024


class ServerLog:
    """The log file of one stdio server (``path``), shared by its successive processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._start: int | None = None

    def open_for_child(self, what: str) -> BinaryIO:
        """Open the log for appending, after a header line naming ``what`` starts; the
        caller hands the file to the child as its stderr, then closes its own copy."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if self.path.stat().st_size > ROTATE_BYTES:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by the caller after spawn
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
        with contextlib.suppress(OSError), open(self.path, "ab") as file:
            file.write(text.replace("\n", " ").encode(errors="replace") + b"\n")

    def tail(self) -> str | None:
        """The last ``TAIL_LINES`` lines or ``TAIL_BYTES`` bytes (the smaller) the current
        process wrote; ``None`` when it wrote nothing or never started."""
        if self._start is None:
            return None
        try:
            with open(self.path, "rb") as file:
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
