"""What an MCP server may ask of its client, and who answers: elicitation, roots,
progress and log messages.

``ClientHooks`` is lent by whoever owns the servers (the run service): every method has
a default that refuses or ignores, so a server pool without a face still answers each
request, and a new kind of request never breaks an old owner. The connection calls the
hooks with the call that was in flight on that connection (a server asks in the middle
of a ``tools/call``; on stdio nothing else ties its request to one call), or ``None``.

Everything a server sends here is untrusted: messages and schemas are bounded, and an
accepted answer is checked against the server's own ``requestedSchema`` (compiled as a
tool schema is, RE2 patterns, off the loop) before it goes back. Progress is coalesced
(:class:`ProgressGate`), so a server flooding notifications costs at most one event per
``PROGRESS_INTERVAL_S`` per call.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from cleveragents.tool import SchemaDefinitionError, ToolCallContext, ToolOutputError, ToolSpec

ElicitMode = Literal["form", "url"]
ElicitAction = Literal["accept", "decline", "cancel"]

MAX_MESSAGE_CHARS = 4000
"""An elicitation message or a progress message is cut to this many characters."""
MAX_PROGRESS_MESSAGE_CHARS = 500
PROGRESS_INTERVAL_S = 0.1
"""At most one progress event per call in this interval; the latest one wins."""


@attrs.frozen
class Elicitation:
    """A server's ``elicitation/create``, as its client's user is asked it."""

    server: str
    mode: ElicitMode
    message: str
    requested_schema: dict[str, Any] | None = None
    """Form mode: the flat object schema the answer's ``content`` must match."""
    url: str | None = None
    """URL mode: where the user is sent (the interaction happens there, not through us)."""
    elicitation_id: str | None = None


@attrs.frozen
class ElicitationAnswer:
    action: ElicitAction
    content: dict[str, Any] | None = None
    """Form mode, ``accept`` only: the values the user gave."""


DECLINE = ElicitationAnswer("decline")


class ElicitationRefused(Exception):
    """An answer that cannot go back to the server (its content misses the schema)."""


@attrs.frozen
class Sampling:
    """A server's ``sampling/createMessage``: a conversation for a model to answer."""

    server: str
    messages: list[tuple[str, str]]
    """``(role, text)`` pairs, ``user`` or ``assistant``; an image or audio block is a
    placeholder in the text."""
    system_prompt: str | None = None
    max_tokens: int = 1000
    """The most tokens the answer may take (the request's ``maxTokens``)."""
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    """The answer ends before the first of these (``stopSequences``)."""


@attrs.frozen
class SamplingAnswer:
    text: str
    model: str
    stop_reason: str = "endTurn"


class SamplingRefused(Exception):
    """The sampling request is not answered; the message says why (to the server)."""


MAX_SAMPLING_MESSAGES = 100
MAX_SAMPLING_CHARS = 200_000
"""Characters of all a sampling request's messages together."""
MAX_STOP_SEQUENCES = 16
MAX_STOP_SEQUENCE_CHARS = 200
MAX_TEMPERATURE = 2.0
"""The widest range a provider takes (OpenAI's and Gemini's 0 to 2)."""


def read_sampling(server: str, params: Mapping[str, Any]) -> Sampling:
    """A ``sampling/createMessage`` request's params (as on the wire), checked;
    ``SamplingRefused`` naming what cannot be done."""
    if params.get("tools"):
        raise SamplingRefused(
            "tools in sampling requests are not supported: send the request without tools"
        )
    raw = params.get("messages")
    if not isinstance(raw, list) or not raw:
        raise SamplingRefused("messages: must be a non-empty list")
    if len(raw) > MAX_SAMPLING_MESSAGES:
        raise SamplingRefused(f"messages: at most {MAX_SAMPLING_MESSAGES}")
    messages: list[tuple[str, str]] = []
    total = 0
    for index, message in enumerate(raw):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in ("user", "assistant"):
            raise SamplingRefused(f"messages[{index}].role: must be 'user' or 'assistant'")
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        text = "\n".join(_sampled_text(block, index) for block in blocks)
        total += len(text)
        if total > MAX_SAMPLING_CHARS:
            raise SamplingRefused(f"messages: more than {MAX_SAMPLING_CHARS} characters")
        messages.append((role, text))
    system = params.get("systemPrompt")
    max_tokens = params.get("maxTokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise SamplingRefused("maxTokens: must be a whole number above 0")
    # modelPreferences and includeContext are advisory (docs/mcp.md): not read.
    return Sampling(
        server, messages, system[:MAX_SAMPLING_CHARS] if isinstance(system, str) else None,
        max_tokens, _temperature(params.get("temperature")),
        _stop_sequences(params.get("stopSequences")),
    )  # fmt: skip


def _temperature(value: object) -> float | None:
    if value is None:
        return None
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not 0 <= value <= MAX_TEMPERATURE  # NaN fails this too
    ):
        raise SamplingRefused(f"temperature: must be a number from 0 to {MAX_TEMPERATURE:g}")
    return float(value)


def _stop_sequences(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_STOP_SEQUENCES:
        raise SamplingRefused(f"stopSequences: a list of at most {MAX_STOP_SEQUENCES} strings")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not 0 < len(item) <= MAX_STOP_SEQUENCE_CHARS:
            raise SamplingRefused(
                f"stopSequences[{index}]: must be a string of 1 to "
                f"{MAX_STOP_SEQUENCE_CHARS} characters"
            )
    return tuple(value)


def _sampled_text(block: Any, index: int) -> str:
    kind = block.get("type") if isinstance(block, Mapping) else None
    if kind == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    if kind in ("image", "audio"):
        media_type = block.get("mimeType")
        return f"[{kind}: {media_type if isinstance(media_type, str) else '?'}]"[:100]
    if kind in ("tool_use", "tool_result"):
        raise SamplingRefused(f"messages[{index}]: tool use in sampling requests is not supported")
    raise SamplingRefused(f"messages[{index}].content: a text, image or audio block")


class ClientHooks:
    """What the owner of MCP servers answers for them; each default refuses or ignores.

    ``call`` is the tool call in flight when the server asked (``None``: none was)."""

    def roots(self) -> list[str]:
        """The absolute paths of the folders a server may work in (``roots/list``)."""
        return []

    def progress(
        self, call: ToolCallContext, progress: float, total: float | None, message: str | None
    ) -> None:
        """A call's progress, already coalesced and bounded; must not block."""
        return None

    async def elicit(self, call: ToolCallContext | None, request: Elicitation) -> ElicitationAnswer:
        """Ask the user; the default declines (nobody to ask)."""
        return DECLINE

    async def sample(self, call: ToolCallContext | None, request: Sampling) -> SamplingAnswer:
        """Answer with a model; raises ``SamplingRefused`` (the default: no model)."""
        raise SamplingRefused("this client has no model to sample with")


NO_HOOKS = ClientHooks()


def read_elicitation(server: str, params: Mapping[str, Any]) -> Elicitation:
    """An ``elicitation/create`` request's params (as on the wire) as an ``Elicitation``;
    ``ValueError`` naming the field for one that cannot be asked."""
    mode = params.get("mode") or "form"
    message = params.get("message")
    if mode not in ("form", "url"):
        raise ValueError(f"mode: {mode!r} is neither 'form' nor 'url'")
    if not isinstance(message, str):
        raise ValueError("message: must be a string")
    message = message[:MAX_MESSAGE_CHARS]
    if mode == "url":
        url = params.get("url")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise ValueError("url: must be an http or https URL")
        if len(url) > 8192:
            raise ValueError("url: longer than 8192 characters")
        elicitation_id = params.get("elicitationId")
        return Elicitation(
            server, "url", message, url=url,
            elicitation_id=elicitation_id if isinstance(elicitation_id, str) else None,
        )  # fmt: skip
    schema = params.get("requestedSchema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ValueError("requestedSchema: must be an object schema")
    return Elicitation(server, "form", message, requested_schema=dict(schema))


def answer_checker(request: Elicitation) -> Callable[[ElicitationAnswer], None]:
    """A check of an answer to ``request`` (raises ``ElicitationRefused``). Build it in a
    worker thread: the schema is the server's, compiled as a tool's input schema is."""
    if request.mode == "url":

        def no_content(answer: ElicitationAnswer) -> None:
            if answer.content is not None:
                raise ElicitationRefused("a URL-mode answer carries no content")

        return no_content
    try:
        spec = ToolSpec(
            "mcp:elicitation", "", {"type": "object"}, _never_called,
            output_schema=request.requested_schema,
        )  # fmt: skip
    except SchemaDefinitionError as exc:
        raise ElicitationRefused(f"its requestedSchema is not usable: {exc}") from None

    def check(answer: ElicitationAnswer) -> None:
        if answer.action != "accept":
            if answer.content is not None:
                raise ElicitationRefused(f"a {answer.action} answer carries no content")
            return
        content = answer.content if answer.content is not None else {}
        try:
            spec.validate_output(content)
        except ToolOutputError as exc:
            why = str(exc).removeprefix(f"invalid output from {spec.name}: ")
            raise ElicitationRefused(
                f"the answer does not match the requested schema: {why}"
            ) from None
        finally:
            spec.release_validators()

    return check


def _never_called(inputs: dict[str, Any]) -> Any:
    raise AssertionError("an answer check is never called")


class ProgressGate:
    """Coalesces one call's progress: the first goes out at once, then at most one per
    ``interval``, the latest pending one flushed when the interval ends or the call
    does. Non-finite numbers and a progress that goes backwards are dropped (the spec
    says it must increase); messages are cut."""

    def __init__(
        self,
        emit: Callable[[float, float | None, str | None], None],
        interval: float = PROGRESS_INTERVAL_S,
    ) -> None:
        self._emit = emit
        self._interval = interval
        self._last_sent = -math.inf
        self._last_progress = -math.inf
        self._pending: tuple[float, float | None, str | None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self._closed or not _finite(progress) or progress < self._last_progress:
            return
        if total is not None and not _finite(total):
            total = None
        if message is not None:
            message = message[:MAX_PROGRESS_MESSAGE_CHARS] if isinstance(message, str) else None
        self._last_progress = progress
        self._pending = (progress, total, message)
        loop = asyncio.get_running_loop()
        wait = self._last_sent + self._interval - loop.time()
        if wait <= 0:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        self._timer = None
        pending, self._pending = self._pending, None
        if pending is None or self._closed:
            return
        self._last_sent = asyncio.get_running_loop().time()
        self._emit(*pending)

    def close(self) -> None:
        """The call ended: send what is pending, then nothing more."""
        if self._timer is not None:
            self._timer.cancel()
        self._flush()
        self._closed = True


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
