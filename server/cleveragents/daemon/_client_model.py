"""The ``client`` model: each LLM call is an ``llm/generate`` request to the editor.

The editor lends its own model (no key in the daemon). Its reply is checked as strictly
as an HTTP provider's: a malformed reply fails the run with a clear message. Text the
editor streams meanwhile may arrive as ``llm/delta`` notifications.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import attrs

from ..llm.errors import ModelProviderError
from ..protocol import ParamsError, wire
from ..protocol import methods as m
from ..rpc import Peer, RpcError, call_peer
from ..tool import LLMRequest, LLMResponse, Message, ToolCall, Usage


def wire_message(message: Message) -> wire.WireMessage:
    return wire.WireMessage(
        message.role,
        message.content,
        [wire.WireToolCall(c.id, c.name, c.arguments) for c in message.tool_calls] or None,
        message.tool_call_id,
        message.name,
        message.is_error or None,
    )


class ClientModel:
    """An async ``LLMCaller`` that asks the client, with a per-call timeout."""

    origin = "client"
    """The model as an MCP server's sampling answer names it: ``llm/generate`` tells
    no model id (its answers are not stamped: their reasoning is the editor's own)."""

    def __init__(self, peer: Peer, run_id: str, timeout_s: float = 300.0) -> None:
        self._peer = peer
        self._run_id = run_id
        self._timeout_s = timeout_s
        self._on_delta: Callable[[int, str], None] | None = None

    def delta(self, iteration: int, text: str) -> None:
        """``llm/delta``: text the editor's model streamed for this run."""
        if self._on_delta is not None:
            self._on_delta(iteration, text)

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        params = wire.LlmGenerateParams(
            self._run_id,
            request.iteration,
            [wire_message(message) for message in request.messages],
            [wire.WireToolSchema(t.name, t.description, dict(t.parameters)) for t in request.tools],
        )
        settings = request.settings
        if settings is not None:  # an MCP server's sampling request: its own settings
            params.max_tokens = settings.max_tokens
            params.temperature = settings.temperature
            params.stop_sequences = list(settings.stop) or None
        self._on_delta = lambda iteration, text: (
            request.on_delta(text) if iteration == request.iteration else None
        )
        deadline = asyncio.timeout(self._timeout_s)
        try:
            async with deadline:
                result: wire.LlmGenerateResult = await call_peer(self._peer, m.LLM_GENERATE, params)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise ModelProviderError(
                f"the client model did not answer llm/generate within {self._timeout_s:g} s"
            ) from None
        except RpcError as exc:
            raise ModelProviderError(f"the client model failed: {exc}") from None
        except ParamsError as exc:
            raise ModelProviderError(f"malformed llm/generate reply: {exc}") from None
        finally:
            self._on_delta = None
        usage = result.usage
        return LLMResponse(
            result.content,
            [ToolCall(c.id, c.name, dict(c.arguments)) for c in result.tool_calls],
            None if usage is None else Usage(**attrs.asdict(usage)),
        )
