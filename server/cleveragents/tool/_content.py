"""Images and audio in a tool's output: what the model is shown.

A tool output that is a list of content blocks (MCP's shape: ``{"type": "text",
"text"}``, ``{"type": "image" | "audio", "data": BASE64, "mimeType"}``, resources...)
holding at least one image or audio block becomes a tool-result message whose text
names each medium with a short placeholder (``[image: image/png, 1.2 KB]``), never its
base64, and whose ``media`` carry the data for the codecs whose providers take media in
or beside a tool result. A model whose codec sends no media (a text-only model, the
editor's model, a scripted one) reads the placeholders. The record keeps the blocks as
they came.

A block that is not what it says (a media type that is not ``image/*`` or ``audio/*``,
data that is not base64, over ``MAX_MEDIA_BYTES``) is described, never sent.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Literal

import attrs

from ._call import output_text
from ._types import JSONValue, Message, ToolCallRecord

MediaKind = Literal["image", "audio"]

MAX_MEDIA_BYTES = 20 * 1024 * 1024
"""Base64 characters of one medium sent to a model (providers refuse larger ones)."""
MAX_MEDIA = 20
"""Media of one tool result sent; the rest are placeholders only."""
BLOCK_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
_MEDIA_TYPE = re.compile(r"(image|audio)/[A-Za-z0-9.+-]{1,64}")


@attrs.frozen
class Media:
    """One image or audio clip of a tool result, base64 as the tool gave it."""

    kind: MediaKind
    media_type: str
    data: str

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


def tool_message(record: ToolCallRecord) -> Message:
    """The tool-result message of a record, as the model reads it."""
    if not record.success:
        text = record.error or "the tool failed"
        return Message("tool", text, [], record.call_id, record.tool_name, True)
    return result_message(record.output, record.call_id, record.tool_name)


def result_message(output: JSONValue, call_id: str | None, name: str | None) -> Message:
    """A successful call's message: its output as text, media apart (see the module)."""
    if output.__class__ is str:
        return Message("tool", output, [], call_id, name)
    found = _blocks_with_media(output)
    if found is None:
        return Message("tool", output_text(output), [], call_id, name)
    text, media = found
    return Message("tool", text, [], call_id, name, media=media)


def _blocks_with_media(output: Any) -> tuple[str, list[Media]] | None:
    if not isinstance(output, list) or not output:
        return None
    if not all(isinstance(b, dict) and b.get("type") in BLOCK_TYPES for b in output):
        return None
    if not any(b.get("type") in ("image", "audio") for b in output):
        return None
    pieces: list[str] = []
    media: list[Media] = []
    for block in output:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            pieces.append(text if isinstance(text, str) else "")
        elif kind in ("image", "audio"):
            medium = _medium(block, kind)
            pieces.append(placeholder(block, kind))
            if medium is not None and len(media) < MAX_MEDIA:
                media.append(medium)
        else:
            pieces.append(output_text(block))
    return "\n".join(pieces), media


def _medium(block: dict[str, Any], kind: MediaKind) -> Media | None:
    media_type, data = block.get("mimeType"), block.get("data")
    if not isinstance(media_type, str) or not _MEDIA_TYPE.fullmatch(media_type):
        return None
    if not media_type.startswith(kind + "/") or not isinstance(data, str):
        return None
    if not data or len(data) > MAX_MEDIA_BYTES:
        return None
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return Media(kind, media_type.lower(), data)


def placeholder(block: dict[str, Any], kind: str) -> str:
    """``[image: image/png, 1.2 KB]``: what a medium is, in words a model can read."""
    media_type = block.get("mimeType")
    shown = media_type if isinstance(media_type, str) and _MEDIA_TYPE.fullmatch(media_type) else "?"
    data = block.get("data")
    size = len(data) * 3 // 4 if isinstance(data, str) else 0
    return f"[{kind}: {shown}, {_size(size)}]"


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KB"
    return f"{count / (1024 * 1024):.1f} MB"
