"""Making model- and tool-controlled text safe to print on a terminal.

A model chooses its own text, its tool calls' names and arguments, and (through the
tools) much of their output. Printed raw, an escape sequence in any of them can set the
window title (OSC 0), write the clipboard (OSC 52), move the cursor to rewrite lines
already shown (CSI), or worse on some terminals. :func:`printable` removes every such
sequence, and every control character but newline and tab; :func:`json_text` escapes
the few that ``json.dumps`` leaves raw.

Deliberately knows nothing of the protocol: callers decide what to print, this module
only makes it inert. Every pattern runs in linear time.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from typing import Any

# ECMA-48, both as 7-bit ESC sequences and as their 8-bit C1 forms (U+0080-U+009F):
# - control strings (OSC, DCS, SOS, PM, APC): introducer, body, BEL or ST, removed whole.
#   The body stops at any ESC, BEL or C1, which keeps the scan linear; an unterminated
#   string loses only its introducer (below), and its body shows as plain text;
# - CSI: parameters, intermediates, one final byte;
# - any other ESC with its intermediates and final byte (ESC 7, ESC ( B, ESC ] ...);
# - then every C0 control but tab and newline, DEL, and every C1 control left, a lone
#   ESC included.
_SEQUENCE = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x80-\x9f]*(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
_RAW_IN_JSON = re.compile(r"[\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without escape sequences or control characters, newline and tab kept."""
    return _SEQUENCE.sub("", text)


def json_text(value: Any, indent: int | None = None) -> str:
    """``value`` as JSON with no raw control character in it (one line by default).

    ``json.dumps`` escapes U+0000-U+001F itself, but with ``ensure_ascii=False`` it
    leaves DEL and the C1 controls (8-bit CSI and OSC among them) raw. Those can only sit
    inside JSON strings, where ``\\u009b`` means the same character.
    """
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def has_browser() -> bool:
    """Whether a graphical browser can be opened: a desktop session, macOS or Windows, or
    ``$BROWSER`` set. A terminal browser (``lynx``) is never started under the user's
    prompt."""
    if os.environ.get("BROWSER"):
        return True
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_in_browser(url: str) -> bool:
    """Open ``url`` in the system's browser when there is one; whether it was tried."""
    if not has_browser():
        return False
    import webbrowser

    # webbrowser waits for some browser commands to exit: never on the event loop, which
    # may be about to answer the browser (a sign-in's loopback callback).
    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    return True
