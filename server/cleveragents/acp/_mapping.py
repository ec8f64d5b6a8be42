"""Our runtime's words in ACP's: tool-call titles, kinds, locations and content; prompt
blocks to prompt text; run statuses to stop reasons. Pure functions, no I/O.

| ours                                   | ACP                                  |
|----------------------------------------|--------------------------------------|
| builtin/file-read                      | kind ``read``, "Read PATH"           |
| builtin/file-write, builtin/file-edit  | kind ``edit``, "Write/Edit PATH"     |
| builtin/file-list, builtin/file-search | kind ``search``                      |
| builtin/shell                          | kind ``execute``, "Run `COMMAND`"    |
| mcp:SERVER/TOOL                        | by its hints: read, fetch, edit, other |
| status completed / limit / cancelled   | stopReason end_turn / max_turn_requests / cancelled |
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlparse

from ..tool import ToolSpec, output_text, result_message

STOP_REASONS = {"completed": "end_turn", "limit": "max_turn_requests", "cancelled": "cancelled"}

_KINDS = {
    "builtin/file-read": "read",
    "builtin/file-write": "edit",
    "builtin/file-edit": "edit",
    "builtin/file-list": "search",
    "builtin/file-search": "search",
    "builtin/shell": "execute",
}
EDIT_TOOLS = ("builtin/file-write", "builtin/file-edit")
_TITLE_MAX = 120


def tool_kind(name: str, spec: ToolSpec | None) -> str:
    kind = _KINDS.get(name)
    if kind is not None:
        return kind
    if spec is None:
        return "other"
    # An MCP tool's kind comes from its hints (readOnlyHint: read; destructiveHint: edit).
    if spec.kind == "read" and not spec.annotations.destructive:
        return "read"
    if spec.kind == "execute":
        return "execute"
    if spec.annotations.destructive:
        return "edit"
    return "other"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _TITLE_MAX else text[: _TITLE_MAX - 1] + "…"


def _arg(arguments: dict[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    return value if isinstance(value, str) and value else None


def tool_title(name: str, arguments: dict[str, Any]) -> str:
    """A title naming what the call works on ("Read src/greet.py", "Run `pytest -q`")."""
    path = _arg(arguments, "path")
    if name == "builtin/file-read":
        title = f"Read {path or '?'}"
        start, end = arguments.get("start_line"), arguments.get("end_line")
        if isinstance(start, int) or isinstance(end, int):
            title += f" (lines {start or 1}-{end or 'end'})"
        return _short(title)
    if name == "builtin/file-write":
        return _short(f"Write {path or '?'}")
    if name == "builtin/file-edit":
        return _short(f"Edit {path or '?'}")
    if name == "builtin/file-list":
        where = f" in {path}" if path else ""
        return _short(f"List {_arg(arguments, 'pattern') or 'files'}{where}")
    if name == "builtin/file-search":
        where = f" in {path}" if path else ""
        glob = _arg(arguments, "glob")
        return _short(f"Search for {_arg(arguments, 'pattern') or '?'}{where}" + (
            f" ({glob})" if glob else ""
        ))  # fmt: skip
    if name == "builtin/shell":
        return _short(f"Run `{_arg(arguments, 'command') or '?'}`")
    if name.startswith("mcp:"):
        server, _, tool = name[4:].partition("/")
        detail = next((v for v in arguments.values() if isinstance(v, str) and v), None)
        return _short(f"{tool} ({server})" + (f": {detail}" if detail else ""))
    return _short(name)


def absolute(root: str, path: str) -> str:
    """A tool's path argument as the absolute path it names (for display only: the tool
    itself resolves and confines it)."""
    return os.path.normpath(os.path.join(root, path))


def tool_locations(name: str, arguments: dict[str, Any], root: str) -> list[dict[str, Any]]:
    path = _arg(arguments, "path")
    if not name.startswith("builtin/file-"):
        return []
    location: dict[str, Any] = {"path": absolute(root, path) if path else root}
    start = arguments.get("start_line")
    if name == "builtin/file-read" and isinstance(start, int) and start >= 1:
        location["line"] = start
    return [location]


def text_content(text: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


def output_content(name: str, output: Any) -> list[dict[str, Any]]:
    """The text of a successful call's output, as the editor shows it."""
    if name == "builtin/shell" and isinstance(output, dict):
        parts = [str(output.get(key) or "") for key in ("stdout", "stderr")]
        text = "\n".join(p.rstrip("\n") for p in parts if p)
        text += f"\n(exit code {output.get('exit_code')})"
        return text_content(text.lstrip("\n"))
    if name == "builtin/file-read" and isinstance(output, dict):
        content = output.get("content")
        if isinstance(content, str):
            return text_content(content)
    message = result_message(output, None, name)
    if message.media:  # an MCP tool's images and audio, as ACP's own content blocks
        blocks = text_content(message.content)
        blocks += [
            {
                "type": "content",
                "content": {"type": m.kind, "data": m.data, "mimeType": m.media_type},
            }
            for m in message.media
        ]
        return blocks
    return text_content(output_text(output))


def diff_content(path: str, old: str | None, new: str) -> list[dict[str, Any]]:
    return [{"type": "diff", "path": path, "oldText": old, "newText": new}]


# -- prompts -----------------------------------------------------------------------------


class PromptError(ValueError):
    """A prompt block we cannot take; the message names it."""


def file_path(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path)


def _inside(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)


def prompt_text(blocks: Any, roots: list[str]) -> str:
    """ACP prompt blocks to one prompt: text as is, an embedded resource's text with its
    URI, a link named (with its path when the file tools can read it)."""
    if not isinstance(blocks, list) or not blocks:
        raise PromptError("params.prompt: expected a non-empty list of content blocks")
    parts: list[str] = []
    for index, block in enumerate(blocks):
        where = f"params.prompt[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise PromptError(f"{where}.text: expected a string")
            parts.append(text)
        elif kind == "resource_link":
            uri, name = block.get("uri"), block.get("name")
            if not isinstance(uri, str):
                raise PromptError(f"{where}.uri: expected a string")
            label = name if isinstance(name, str) and name else uri
            path = file_path(uri)
            if path is not None and _inside(path, roots):
                parts.append(f"[{label}]({uri}) (readable with builtin/file-read at {path})")
            else:
                parts.append(f"[{label}]({uri})")
        elif kind == "resource":
            resource = block.get("resource")
            uri = resource.get("uri") if isinstance(resource, dict) else None
            if not isinstance(uri, str):
                raise PromptError(f"{where}.resource.uri: expected a string")
            text = resource.get("text") if isinstance(resource, dict) else None
            if isinstance(text, str):
                parts.append(f'<resource uri="{uri}">\n{text}\n</resource>')
            else:
                parts.append(f'<resource uri="{uri}" (binary, not included)>')
        elif kind in ("image", "audio"):
            raise PromptError(f"{where}: {kind} blocks are not supported (promptCapabilities)")
        else:
            raise PromptError(f"{where}.type: unknown content block type {kind!r}")
    return "\n\n".join(parts)


def title_of(blocks: Any) -> str:
    """A session's title: its first prompt's text, cut to 80 characters."""
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    text = " ".join(" ".join(t for t in texts if isinstance(t, str)).split())
    return text[:80]
