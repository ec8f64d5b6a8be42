"""What ``cleveragents chat`` reads from the person at the terminal: a line editor with
history, on prompt_toolkit.

- **Enter** sends the message; **Alt-Enter** (or Esc then Enter) starts a new line, as
  does a line ending in ``\\`` (the backslash is dropped); a pasted text keeps its
  newlines (bracketed paste).
- **Ctrl-C** clears what is typed; on an empty line it raises ``KeyboardInterrupt`` (the
  chat says how to leave, and leaves on the next one). **Ctrl-D** on an empty line raises
  ``EOFError``: the chat ends.
- **History**: Up and Down recall earlier messages, of every chat that used this state
  dir; Ctrl-R searches them. They are kept in ``STATE_DIR/chat-history`` (0600, in the
  0700 state dir), written through the state dir's pinned descriptor like every file
  there (a link planted at that name is not followed), in prompt_toolkit's
  ``FileHistory`` format; only the newest ``HISTORY_BYTES`` are read back.

prompt_toolkit is imported here only: ``run``, ``serve`` and ``runs`` never load it.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import History
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from ..statedir import StateDir, write_all

logger = logging.getLogger(__name__)

HISTORY_FILE = "chat-history"
HISTORY_BYTES = 256 * 1024
"""How much of the history file is read back (its newest entries); the file is cut to
this when it has grown past four times as much."""
PROMPT = "> "
CONTINUATION = ". "


class StateDirHistory(History):
    """The chat's history, in the state dir (see the module docstring). A history that
    cannot be read or written is logged once and the chat goes on without it."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__()
        self.state = StateDir(state_dir)
        self.warned = False

    def load_history_strings(self) -> Iterable[str]:
        try:
            data = self._read_tail()
        except OSError as exc:
            self._warn("read", exc)
            return []
        return reversed(parse_history(data))

    def _read_tail(self) -> bytes:
        folder = self.state.folder(create=True)
        if folder is None:
            return b""
        with folder:
            fd = folder.open_read(HISTORY_FILE)
            if fd is None:
                return b""
            with os.fdopen(fd, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(max(0, size - HISTORY_BYTES))
                data = handle.read(HISTORY_BYTES)
            if size > HISTORY_BYTES:
                data = data[data.find(b"\n#") + 1 :] if b"\n#" in data else b""
            if size > 4 * HISTORY_BYTES:
                folder.replace(HISTORY_FILE, data)  # keep the file from growing for ever
            return data

    def store_string(self, string: str) -> None:
        lines = [f"\n# {datetime.datetime.now().isoformat(timespec='seconds')}\n"]
        lines += [f"+{line}\n" for line in string.split("\n")]
        try:
            folder = self.state.folder(create=True)
            if folder is None:
                return
            with folder:
                fd = folder.open_append(HISTORY_FILE)
                if fd is None:
                    return
                try:
                    write_all(fd, "".join(lines).encode("utf-8", "replace"))
                finally:
                    os.close(fd)
        except OSError as exc:
            self._warn("written", exc)

    def _warn(self, what: str, exc: OSError) -> None:
        if not self.warned:  # once: every message would say it again
            self.warned = True
            path = self.state.path / HISTORY_FILE
            logger.warning("chat history %s not %s: %s", path, what, exc.strerror or exc)

    def close(self) -> None:
        self.state.close()


def parse_history(data: bytes) -> list[str]:
    """The entries of a ``FileHistory``-format text, oldest first: each is a run of
    ``+``-prefixed lines, entries separated by ``# time`` lines."""
    entries: list[str] = []
    lines: list[str] = []
    for raw in data.decode("utf-8", "replace").splitlines():
        if raw.startswith("+"):
            lines.append(raw[1:])
        elif lines:
            entries.append("\n".join(lines))
            lines = []
    if lines:
        entries.append("\n".join(lines))
    return entries


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("enter")
    @keys.add("c-j")  # a "\n" (typed ahead while a turn ran, through the tty's ICRNL)
    def _send(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        document = buffer.document
        if document.is_cursor_at_the_end and document.text.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _new_line(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _clear_or_interrupt(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    return keys


class LineEditor:
    """Reads one message at a time (``read``): ``EOFError`` on Ctrl-D, ``KeyboardInterrupt``
    on Ctrl-C at an empty line."""

    def __init__(self, state_dir: Path) -> None:
        self.history = StateDirHistory(state_dir)
        self.session: PromptSession[str] = PromptSession(
            history=self.history, multiline=True, key_bindings=_bindings(),
            prompt_continuation=CONTINUATION, enable_history_search=False,
        )  # fmt: skip

    async def read(self) -> str:
        return await self.session.prompt_async(PROMPT)

    def leave(self) -> None:
        """End a pending ``read`` with ``EOFError`` (a signal that ends the chat)."""
        app = self.session.app
        if app.future is not None and not app.future.done():
            app.exit(exception=EOFError)

    def close(self) -> None:
        self.history.close()
