"""The tool requests (``tools/register``, ``tools/unregister``, ``tools/list``) and the
tools a client registers, whose calls are ``tools/call`` requests back to it.

A client tool is a core ``ToolSpec`` whose handler asks the client: the core validates its
inputs and output and applies its timeout like any other tool's. Tools go to the shared
registry, or to one run's own layer (``runId``). Names under ``builtin/`` and ``mcp:``
are the daemon's: a client can neither register nor remove them.

A tool's schemas are compiled in a worker thread, never on the event loop: a large schema
takes up to about a second to compile, and a ``tools/register`` may carry many. The tool
requests, and ``run/start`` (:meth:`ClientTools.settled`), still take effect in the order
they arrived: each waits for the registrations before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol import ParamsError, camel, wire
from ..protocol import methods as m
from ..rpc import Peer, RpcError, call_peer
from ..runs import RunService, reserved
from ..tool import (
    DuplicateToolError,
    SchemaDefinitionError,
    ToolAnnotations,
    ToolCallContext,
    ToolError,
    ToolNotFoundError,
    ToolRegistry,
    ToolSpec,
    output_text,
)
from ..transcripts import RunNotFoundError

DEFAULT_CLIENT_TOOL_TIMEOUT_S = 120.0


class ClientToolError(ToolError):
    """A client tool answered with an error, ``isError``, or a malformed reply."""


class ClientTools:
    """Serves the tool requests over the shared registry and the runs' own layers."""

    def __init__(self, service: RunService, peer: Peer) -> None:
        self.service = service
        self.registry = service.registry
        self.peer = peer
        self._in_order = asyncio.Lock()
        """Held by each tool request while it runs, so they take effect in arrival order."""

    async def settled(self) -> None:
        """Return once the tool requests that arrived before this call have taken effect."""
        async with self._in_order:
            pass

    def layer(self, run_id: str | None) -> ToolRegistry:
        if run_id is None:
            return self.registry
        handle = self.service.handle(run_id)
        if handle is None:
            raise RunNotFoundError(f"unknown or finished run {run_id!r}")
        return handle.registry

    async def register(self, params: wire.RegisterToolsParams) -> wire.RegisterToolsResult:
        async with self._in_order:
            self.layer(params.run_id)  # an unknown run is refused before anything compiles
            specs = await asyncio.to_thread(self._specs, params.tools)
            return self._add(params, specs)

    def _specs(self, definitions: list[wire.ToolDefinition]) -> list[ToolSpec]:
        return [self._spec(index, d) for index, d in enumerate(definitions)]

    def _add(
        self, params: wire.RegisterToolsParams, specs: list[ToolSpec]
    ) -> wire.RegisterToolsResult:
        layer = self.layer(params.run_id)  # the run may have ended while its tools compiled
        names = [spec.name for spec in specs]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise DuplicateToolError(f"tool {sorted(duplicates)[0]!r} appears twice in one call")
        if not params.replace:
            for name in names:
                if name in layer:
                    raise DuplicateToolError(
                        f"tool {name!r} is already registered (pass replace: true to replace it)"
                    )
        for spec in specs:
            layer.register(spec, replace=True)
        return wire.RegisterToolsResult(names)

    async def unregister(self, params: wire.UnregisterToolsParams) -> wire.UnregisterToolsResult:
        await self.settled()
        layer = self.layer(params.run_id)
        for name in params.names:
            if reserved(name):
                raise ToolError(f"tool {name!r} is built in and cannot be removed")
            if not layer.owns(name):
                raise ToolNotFoundError(f"tool {name!r} is not registered")
        for name in params.names:
            layer.unregister(name)
        return wire.UnregisterToolsResult(list(params.names))

    async def list(self, params: wire.ListToolsParams) -> wire.ListToolsResult:
        await self.settled()
        layer = self.layer(params.run_id)
        return wire.ListToolsResult([listed(spec) for spec in layer.specs()])

    def _spec(self, index: int, definition: wire.ToolDefinition) -> ToolSpec:
        name = definition.name
        if reserved(name):
            raise ToolError(f"tool name {name!r} uses a reserved prefix (builtin/, mcp:)")
        if definition.timeout_ms is not None and definition.timeout_ms <= 0:
            raise ToolError(f"tool {name!r}: timeoutMs must be positive")
        a = definition.annotations or wire.ToolAnnotationsWire()
        timeout = (
            definition.timeout_ms / 1000
            if definition.timeout_ms is not None
            else DEFAULT_CLIENT_TOOL_TIMEOUT_S
        )
        try:
            return ToolSpec(
                name, definition.description, definition.input_schema, self._handler(name),
                output_schema=definition.output_schema,
                annotations=ToolAnnotations(
                    bool(a.read_only), bool(a.destructive), bool(a.idempotent)
                ),
                timeout_s=timeout,
            )  # fmt: skip
        except SchemaDefinitionError as exc:
            where = ".".join(part for part in (camel(exc.field), exc.path) if part)
            raise ParamsError(
                f"params.tools[{index}].{where}: {exc.problem} (tool {name!r}: "
                "not a valid JSON Schema)"
            ) from None

    def _handler(self, name: str) -> Callable[[dict[str, Any], ToolCallContext], Awaitable[Any]]:
        async def call_client(inputs: dict[str, Any], call: ToolCallContext) -> Any:
            run = self.service.run_of(call)
            if run is None:
                raise ClientToolError(f"client tool {name} was called outside a run")
            params = wire.ToolsCallParams(
                run.run_id, call.call_id, call.iteration, name, call.arguments,
                inputs["sandbox_root"], inputs["resource_bindings"] or {},
            )  # fmt: skip
            return await self._ask(name, run.run_id, call.call_id, params)

        return call_client

    async def _ask(self, name: str, run_id: str, call_id: str, params: wire.ToolsCallParams) -> Any:
        """One ``tools/call``: its output, or ``ClientToolError`` saying what went wrong."""
        await self.peer.pace()
        try:
            result: wire.ToolsCallResult = await call_peer(
                self.peer, m.TOOLS_CALL, params, {"runId": run_id, "callId": call_id}
            )
        except RpcError as exc:
            raise ClientToolError(f"client tool {name} failed: {exc}") from None
        except ParamsError as exc:
            raise ClientToolError(f"client tool {name} answered tools/call with {exc}") from None
        if result.is_error is True:
            raise ClientToolError(output_text(result.output))
        return result.output


def listed(spec: ToolSpec) -> wire.ListedTool:
    """A tool as ``tools/list`` shows it."""
    a = spec.annotations
    source = (
        "builtin" if spec.name.startswith("builtin/")
        else "mcp" if spec.name.startswith("mcp:")
        else "client"
    )  # fmt: skip
    timeout_ms = int(spec.timeout_s * 1000) if spec.timeout_s is not None else None
    return wire.ListedTool(
        spec.name, spec.description, dict(spec.input_schema), source,  # type: ignore[arg-type]
        dict(spec.output_schema) if spec.output_schema is not None else None,
        wire.ToolAnnotationsWire(a.read_only, a.destructive, a.idempotent),
        timeout_ms,
    )  # fmt: skip
