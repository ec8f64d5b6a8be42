"""An OpenAI-compatible chat-completions server on loopback that enforces a context window
as OpenAI does, for the context-budget tests and benchmark.

Its rules, from OpenAI's API as clients meet it:

- a request whose size passes the window is refused with HTTP 400 and OpenAI's error
  body: ``{"error": {"message": "This model's maximum context length is N tokens.
  However, your messages resulted in M tokens. Please reduce the length of the
  messages.", "type": "invalid_request_error", "param": "messages", "code":
  "context_length_exceeded"}}``;
- a ``tool`` message must answer a call of the assistant message before it ("Invalid
  parameter: messages with role 'tool' must be a response to a preceeding message with
  'tool_calls'."), and every call must be answered ("An assistant message with
  'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The
  following tool_call_ids did not have response messages: ..."), both 400
  ``invalid_request_error``;
- usage is reported honestly: ``prompt_tokens`` is the fake's own count of the request.

The fake counts a token per ``BYTES_PER_TOKEN`` bytes of the request's JSON (messages
and tools): not our estimate, but close to it, as a real tokenizer is.

Its agent reads ``FILE`` with ``builtin/file-read`` on each of its first ``turns``
requests, then answers ``done``. A request without tools whose system message asks for a
summary is a compaction's: it is answered with a short summary.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from kit.loopback import LoopbackServer, Recorded, Reply, data, json_reply, sse_reply

BYTES_PER_TOKEN = 4
FILE = "notes/big.txt"
READ = "builtin__file-read"


def count(body: dict[str, Any]) -> int:
    """The fake's token count of a request."""
    sent = {"messages": body.get("messages"), "tools": body.get("tools")}
    return len(json.dumps(sent, ensure_ascii=False).encode()) // BYTES_PER_TOKEN


def _error(status: int, message: str, code: str | None, param: str | None = None) -> Reply:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param,
                      "code": code}}  # fmt: skip
    return json_reply(body, status)


def pairing_error(messages: list[dict[str, Any]]) -> str | None:
    """OpenAI's refusal of a history whose tool messages and calls do not pair, or None."""
    pending: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not "
                f"have response messages: {', '.join(pending)}"
            )
        if role == "assistant":
            pending = [c["id"] for c in message.get("tool_calls") or ()]
    return None


def _stream(delta: dict[str, Any], finish: str, prompt: int, completion: int) -> Reply:
    base = {"id": "chatcmpl-w", "object": "chat.completion.chunk", "created": 1, "model": "w"}
    return sse_reply(
        data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
        data({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        data({**base, "choices": [], "usage": {
            "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}}),
        "data: [DONE]\n\n",
    )  # fmt: skip


class WindowedChat:
    """The fake's state: its window (``None``: unlimited), its agent's turns, and what it
    saw (the size of each request, the refusals, the summaries)."""

    def __init__(self, window: int | None, turns: int) -> None:
        self.window = window
        self.turns = turns
        self.sizes: list[int] = []
        """The size of every turn request (summaries apart), in the fake's tokens."""
        self.summary_sizes: list[int] = []
        self.refused: list[str] = []
        self._turn = 0
        self._lock = threading.Lock()
        self.server = LoopbackServer(keep_alive=True, respond=self.respond)

    def respond(self, request: Recorded) -> Reply:
        body = request.body or {}
        messages = body.get("messages") or []
        size = count(body)
        if self.window is not None and size > self.window:
            message = (
                f"This model's maximum context length is {self.window} tokens. However, your "
                f"messages resulted in {size} tokens. Please reduce the length of the messages."
            )
            self.refused.append(message)
            return _error(400, message, "context_length_exceeded", "messages")
        wrong = pairing_error(messages)
        if wrong is not None:
            self.refused.append(wrong)
            return _error(400, wrong, None, "messages")
        system = messages[0].get("content") if messages else ""
        if not body.get("tools") and isinstance(system, str) and "compact" in system:
            self.summary_sizes.append(size)
            return _stream({"role": "assistant", "content": f"Summary: read {FILE} often."},
                           "stop", size, 12)  # fmt: skip
        with self._lock:
            self._turn += 1
            turn = self._turn
        self.sizes.append(size)
        if turn > self.turns:
            return _stream({"role": "assistant", "content": "done"}, "stop", size, 1)
        call = {"index": 0, "id": f"call_{turn}", "type": "function",
                "function": {"name": READ, "arguments": json.dumps({"path": FILE})}}  # fmt: skip
        return _stream(
            {"role": "assistant", "content": f"Reading, turn {turn}.", "tool_calls": [call]},
            "tool_calls", size, 20,
        )  # fmt: skip

    def __enter__(self) -> WindowedChat:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def spec(self, window: int | None = None) -> dict[str, Any]:
        """The object model spec of this server (the window the daemon is told)."""
        spec: dict[str, Any] = {
            "provider": "openai", "model": "windowed-test", "baseUrl": self.server.base_url + "/v1",
            "maxRetries": 0, "timeoutMs": 30_000,
        }  # fmt: skip
        told = window if window is not None else self.window
        if told is not None:
            spec["contextWindow"] = told
        return spec


def write_big_file(root: Any, size: int = 40 * 1024) -> str:
    """A text file of about ``size`` bytes at ``FILE`` under ``root``: lines of prose."""
    line = "The quick brown fox jumps over the lazy dog, and the log goes on and on. " * 1
    text = (line + "\n") * (size // (len(line) + 1))
    path = root / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text
