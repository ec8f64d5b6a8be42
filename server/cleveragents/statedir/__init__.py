"""The daemon's state dir by descriptor: what every layer that keeps files there opens
them through (transcripts and the run index, kept tool outputs, ACP sessions).

Every file under the state dir is opened beneath a pinned descriptor of it, never by a
name a link could redirect: reads take regular files only and never wait on a FIFO, new
files are exclusive and 0600, folders 0700 (:mod:`~cleveragents.statedir._files`). The
state dir's secret signs what the daemon must recognise as its own writing
(:mod:`~cleveragents.statedir._secret`).

It stands on the standard library alone, below every layer that writes the state dir;
it knows nothing of what the files hold.
"""

from ._files import NO_FOLLOW, Folder, StateDir, read_lines, warn_once, write_all
from ._secret import sign, signed

__all__ = [
    "NO_FOLLOW",
    "Folder",
    "StateDir",
    "read_lines",
    "sign",
    "signed",
    "warn_once",
    "write_all",
]
