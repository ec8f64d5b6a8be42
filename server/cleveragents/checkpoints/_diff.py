"""Line counts and unified diffs in git's format, from two sides' bytes. No I/O.

A side is text when it holds no NUL and decodes as UTF-8; anything else is binary
(``Binary files a/P and b/P differ``). A text file over the size bound on either side
gets exact-enough line counts (lines of one side not matched in the other, as
multisets) and no hunks, so no diff costs more than a bounded line matching.
"""

from __future__ import annotations

import difflib
from collections import Counter

from ._model import ChangeStatus, FileChange
from ._tree import LINK, UNCAPTURED, Node

_CONTEXT = 3
_QUOTED = {ord('"'): '\\"', ord("\\"): "\\\\", ord("\t"): "\\t", ord("\n"): "\\n"}


def _lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def quote(prefix: str, path: str) -> str:
    """``prefix + path`` as git writes it in a patch: C-quoted when it holds a quote,
    a backslash, a control character or a byte outside ASCII."""
    raw = (prefix + path).encode("utf-8", "surrogateescape")
    if all(0x20 <= b < 0x7F and b not in (0x22, 0x5C) for b in raw):
        return prefix + path
    out = []
    for b in raw:
        if b in _QUOTED:
            out.append(_QUOTED[b])
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _git_mode(node: Node) -> str:
    return "120000" if node.kind == LINK else f"100{node.mode & 0o777:03o}"


def _range(start: int, length: int) -> str:
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _hunks(old: list[bytes], new: list[bytes]) -> tuple[int, int, list[str]]:
    matcher = difflib.SequenceMatcher(None, old, new)
    additions = deletions = 0
    for opcode, i1, i2, j1, j2 in matcher.get_opcodes():
        if opcode in ("replace", "delete"):
            deletions += i2 - i1
        if opcode in ("replace", "insert"):
            additions += j2 - j1
    out: list[str] = []
    for group in matcher.get_grouped_opcodes(_CONTEXT):
        first, last = group[0], group[-1]
        out.append(
            f"@@ -{_range(first[1], last[2] - first[1])} "
            f"+{_range(first[3], last[4] - first[3])} @@\n"
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_line(" ", line) for line in old[i1:i2])
                continue
            out.extend(_line("-", line) for line in old[i1:i2])
            out.extend(_line("+", line) for line in new[j1:j2])
    return additions, deletions, out


def _line(sign: str, line: bytes) -> str:
    text = line.decode("utf-8")
    if text.endswith("\n"):
        return sign + text
    return sign + text + "\n\\ No newline at end of file\n"


def _rough_counts(old: list[bytes], new: list[bytes]) -> tuple[int, int]:
    before, after = Counter(old), Counter(new)
    return sum((after - before).values()), sum((before - after).values())


def file_change(
    path: str,
    old: tuple[Node, bytes | None] | None,
    new: tuple[Node, bytes | None] | None,
    max_bytes: int,
    *,
    patch: bool = True,
) -> tuple[FileChange, str]:
    """The change of one file or link from ``old`` to ``new`` (node and content; the
    content is ``None`` for an entry not captured), and its patch text."""
    status: ChangeStatus = "added" if old is None else "deleted" if new is None else "modified"
    captured = all(side is None or side[0].kind != UNCAPTURED for side in (old, new))
    if old is not None and new is not None and (old[0].kind == LINK) != (new[0].kind == LINK):
        # A file became a link or the reverse: git writes a deletion and an addition.
        gone, gone_patch = file_change(path, old, None, max_bytes, patch=patch)
        came, came_patch = file_change(path, None, new, max_bytes, patch=patch)
        change = FileChange(
            path, "modified", came.additions, gone.deletions, gone.binary or came.binary, captured
        )
        return change, gone_patch + came_patch
    old_data = old[1] if old is not None else b""
    new_data = new[1] if new is not None else b""
    old_text = _text(old_data) if old_data is not None else None
    new_text = _text(new_data) if new_data is not None else None
    binary = old_text is None or new_text is None
    head = [f"diff --git {quote('a/', path)} {quote('b/', path)}\n"]
    if old is None and new is not None:
        head.append(f"new file mode {_git_mode(new[0])}\n")
    elif new is None and old is not None:
        head.append(f"deleted file mode {_git_mode(old[0])}\n")
    elif old is not None and new is not None and _git_mode(old[0]) != _git_mode(new[0]):
        head.append(f"old mode {_git_mode(old[0])}\nnew mode {_git_mode(new[0])}\n")
    a_name = quote("a/", path) if old is not None else "/dev/null"
    b_name = quote("b/", path) if new is not None else "/dev/null"
    same_content = (
        old is not None and new is not None and old[0].digest == new[0].digest and captured
    )
    additions = deletions = 0
    body: list[str] = []
    if same_content:
        pass  # a mode change alone
    elif binary:
        body.append(f"Binary files {a_name} and {b_name} differ\n")
    else:
        assert old_data is not None
        assert new_data is not None
        old_lines, new_lines = _lines(old_data), _lines(new_data)
        if max(len(old_data), len(new_data)) > max_bytes:
            additions, deletions = _rough_counts(old_lines, new_lines)
            body.append(
                f"Files {a_name} and {b_name} differ (over {max_bytes} bytes: no line diff)\n"
            )
        else:
            additions, deletions, hunks = _hunks(old_lines, new_lines)
            if hunks:
                body.extend([f"--- {a_name}\n", f"+++ {b_name}\n", *hunks])
    change = FileChange(path, status, additions, deletions, binary, captured)
    return change, "".join(head + body) if patch else ""
