"""Where each provider takes images (and audio) that come back from a tool, and what it
says to the rest: the rules the loopback fakes (``fake_anthropic``, ``fake_gemini``,
``fake_openai``) enforce, with the providers' own 400 messages.

- Anthropic: a ``tool_result``'s ``content`` is a string or a list of ``text`` and
  ``image`` blocks; an image's ``source`` is ``{type: base64, media_type, data}`` with
  ``media_type`` one of jpeg, png, gif, webp.
- Gemini 3: media go inside the ``functionResponse``, as ``parts`` of
  ``{inlineData: {mimeType, data}}`` (a sibling ``inlineData`` part is not how it pairs
  them with the call).
- OpenAI Chat Completions: a ``tool`` message's content is a string or ``text`` parts
  only; images go in a ``user`` message, and not between the tool messages that answer
  one assistant message.
- OpenAI Responses: a ``function_call_output``'s ``output`` is a string or a list of
  ``input_text``, ``input_image`` (``image_url`` a URL or a data URL) and ``input_file``.

Base64 that does not decode is refused by each.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

ANTHROPIC_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _decodes(data: Any) -> bool:
    if not isinstance(data, str) or not data:
        return False
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def anthropic_problem(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for i, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if not isinstance(block, Mapping) or block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if inner is None or isinstance(inner, str):
                continue
            for k, part in enumerate(inner):
                where = f"messages.{i}.content.{j}.content.{k}"
                kind = part.get("type") if isinstance(part, Mapping) else None
                if kind == "text":
                    continue
                if kind != "image":
                    return f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected tags: 'text', 'image', 'search_result', 'document'"
                source = part.get("source") or {}
                if (
                    source.get("type") != "base64"
                    or source.get("media_type") not in ANTHROPIC_IMAGE_TYPES
                ):
                    return f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
                if not _decodes(source.get("data")):
                    return f"{where}.image.source.base64: invalid base64 data"
    return None


def gemini_problem(contents: Sequence[Mapping[str, Any]]) -> str | None:
    for i, content in enumerate(contents):
        for j, part in enumerate(content.get("parts") or ()):
            if not isinstance(part, Mapping):
                continue
            response = part.get("functionResponse")
            if not isinstance(response, Mapping):
                continue
            for k, inner in enumerate(response.get("parts") or ()):
                blob = (
                    (inner.get("inlineData") or inner.get("inline_data"))
                    if isinstance(inner, Mapping)
                    else None
                )
                where = f"contents[{i}].parts[{j}].function_response.parts[{k}]"
                if not isinstance(blob, Mapping):
                    return f"Invalid value at '{where}': a function response part holds inline_data or file_data"
                media_type = blob.get("mimeType") or blob.get("mime_type")
                if not isinstance(media_type, str) or not _decodes(blob.get("data")):
                    return f"Invalid value at '{where}.inline_data.data' (TYPE_BYTES), Base64 decoding failed"
    return None


def chat_problem(messages: Sequence[Mapping[str, Any]]) -> str | None:
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            open_calls = {str(c.get("id")) for c in message.get("tool_calls") or ()}
            continue
        if role == "tool":
            content = message.get("content")
            if isinstance(content, list):
                for j, part in enumerate(content):
                    if not isinstance(part, Mapping) or part.get("type") != "text":
                        return f"Invalid 'messages[{i}].content[{j}].type': expected 'text' in a tool message."
            open_calls.discard(str(message.get("tool_call_id")))
            continue
        if open_calls:
            missing = sorted(open_calls)[0]
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {missing}"
            )
        content = message.get("content")
        if isinstance(content, list):
            for j, part in enumerate(content):
                if isinstance(part, Mapping) and part.get("type") == "image_url":
                    url = str((part.get("image_url") or {}).get("url") or "")
                    if url.startswith("data:") and not _decodes(url.partition(";base64,")[2]):
                        return f"Invalid 'messages[{i}].content[{j}].image_url.url': invalid base64 image data."
    return None


def responses_problem(items: Sequence[Mapping[str, Any]]) -> str | None:
    for i, item in enumerate(items):
        if item.get("type") != "function_call_output":
            continue
        output = item.get("output")
        if isinstance(output, str):
            continue
        if not isinstance(output, list):
            return f"Invalid type for 'input[{i}].output': expected a string or an array."
        for j, part in enumerate(output):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind not in ("input_text", "input_image", "input_file"):
                return f"Invalid value: '{kind}'. Supported values are: 'input_text', 'input_image', and 'input_file'."
            if kind == "input_image":
                url = str(part.get("image_url") or "")
                if url.startswith("data:") and not _decodes(url.partition(";base64,")[2]):
                    return f"Invalid 'input[{i}].output[{j}].image_url'. Expected a base64-encoded data URL with an image MIME type."
    return None
