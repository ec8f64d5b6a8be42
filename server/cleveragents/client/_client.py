"""``Client``: spawn ``cleveragents serve``, register Python tools, run, stream events.

async with await Client.spawn(workspace="/path/to/project", model="scripted:turns.json") as client:
    @client.tool
    def greet(name: str) -> str:
        "Greet someone."
        return f"Hello, {name}!"

    result = await client.run("Say hello", on_event=print, max_iterations=3)

What the caller gets wrong fails loudly where it is made: an unknown ``run()`` keyword
is a ``TypeError``, and so is a ``permission_handler`` answer that is neither an outcome
nor ``{"outcome": ...}`` (``run()`` raises it, after cancelling the run). Cancelling the
task that awaits ``run()`` cancels the run on the daemon before ``CancelledError``
reaches the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

from ..protocol import RpcError
from ..protocol import methods as m
from ..tool import JsonRpcCode
from ._arguments import (
    ElicitationCallback,
    EventCallback,
    LlmCallback,
    PermissionCallback,
    ToolFunction,
    initialize_params,
    permission_outcome,
    run_params,
)
from ._connection import DaemonConnection
from ._schema import function_schema
from ._stderr import DaemonStartError, LineCallback, StderrTail, to_stderr

F = TypeVar("F", bound=Callable[..., Any])

CANCEL_WAIT_S = 5.0
"""How long a cancelled ``run()`` waits for the daemon to end the run before raising."""


_ACTIONS = ("accept", "decline", "cancel")

RUN_EVENTS = frozenset(method.name for method in m.RUN_EVENTS.values())
"""The run notifications, from the method table (one per core run event)."""


class Client:
    """A connection to one spawned daemon. Many runs may go on at once."""

    def __init__(self, process: asyncio.subprocess.Process, connection: DaemonConnection) -> None:
        self.process = process
        self.connection = connection
        self.capabilities: dict[str, Any] = {}
        self._tools: dict[str, ToolFunction] = {}
        self._run_listeners: dict[str, list[EventCallback]] = {}
        self._any_listeners: list[EventCallback] = []
        self.permission_handler: PermissionCallback | None = None
        self.llm_handler: LlmCallback | None = None
        self.elicitation_handler: ElicitationCallback | None = None
        """Answers an MCP server's question (``mcp/elicit``); spawn with
        ``elicitation=True`` for the daemon to ask this client at all."""
        self.stderr: StderrTail | None = None
        self._registering: list[asyncio.Task[None]] = []
        self._handler_errors: dict[str, BaseException] = {}
        connection.notification_handlers.append(self._on_notification)
        connection.handle(m.TOOLS_CALL, self._on_tools_call)
        connection.handle(m.PERMISSION_REQUEST, self._on_permission)
        connection.handle(m.LLM_GENERATE, self._on_llm_generate)
        connection.handle(m.MCP_ELICIT, self._on_elicit)

    @classmethod
    async def spawn(
        cls,
        workspace: str | Path,
        *,
        model: str | Mapping[str, Any] | None = None,
        state_dir: str | Path | None = None,
        automation_profile: str | None = None,
        permissions: bool = False,
        llm: bool = False,
        elicitation: bool = False,
        checkpoints: bool = True,
        extra_folders: tuple[str | Path, ...] = (),
        command: list[str] | None = None,
        env: Mapping[str, str] | None = None,
        on_stderr: LineCallback | None = to_stderr,
    ) -> Client:
        """Start ``cleveragents serve`` and complete ``initialize``.

        The daemon runs in a session of its own, so a Ctrl-C at the terminal reaches
        only this process, which then cancels its runs cleanly; the daemon still ends
        with this process (end of its input). Each line of its stderr goes to
        ``on_stderr`` (default: this process's stderr). If it exits before answering
        ``initialize``, :class:`DaemonStartError` carries its exit code and stderr tail.
        ``checkpoints=False``: no run of this daemon snapshots the workspace."""
        argv = command or [sys.executable, "-m", "cleveragents", "serve"]
        if state_dir is not None:
            argv = [*argv, "--state-dir", str(state_dir)]
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})},
            limit=64 * 1024 * 1024, start_new_session=True,
        )  # fmt: skip
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        connection = DaemonConnection(process.stdout, process.stdin)
        connection.start()
        client = cls(process, connection)
        client.stderr = StderrTail(process.stderr, on_stderr)
        # One resolve per folder at spawn time; not worth a thread hop.
        folders = [Path(p).resolve() for p in (workspace, *extra_folders)]  # noqa: ASYNC240
        params = initialize_params(
            folders, model=model, automation_profile=automation_profile,
            permissions=permissions, llm=llm, checkpoints=checkpoints, elicitation=elicitation,
        )  # fmt: skip
        await client._initialize(params)
        return client

    async def _initialize(self, params: dict[str, Any]) -> None:
        """``initialize`` then ``initialized``; a daemon that ends first is a
        :class:`DaemonStartError`, and any failure closes this client."""
        try:
            result = await self.connection.request("initialize", params)
        except ConnectionError:
            await self.close()
            assert self.stderr is not None
            await self.stderr.drained(1.0)
            raise DaemonStartError(self.process.returncode, self.stderr.tail()) from None
        except BaseException:
            await self.close()
            raise
        self.capabilities = result["capabilities"]["experimental"]["cleveragents"]
        self.connection.notify("initialized", {})

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- tools -------------------------------------------------------------------------

    async def register_tool(
        self,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        function: ToolFunction,
        *,
        annotations: Mapping[str, bool] | None = None,
        timeout_ms: int | None = None,
        run_id: str | None = None,
        replace: bool = False,
    ) -> None:
        definition: dict[str, Any] = {
            "name": name, "description": description, "inputSchema": dict(input_schema),
        }  # fmt: skip
        if annotations:
            definition["annotations"] = dict(annotations)
        if timeout_ms is not None:
            definition["timeoutMs"] = timeout_ms
        params: dict[str, Any] = {"tools": [definition]}
        if run_id is not None:
            params["runId"] = run_id
        if replace:
            params["replace"] = True
        self._tools[name] = function
        await self.connection.request(m.TOOLS_REGISTER, params)

    @overload
    def tool(self, function: F, /) -> F: ...

    @overload
    def tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, bool] | None = None,
        timeout_ms: int | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        function: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, bool] | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        """Register a function as a client tool: ``@client.tool`` or ``@client.tool(...)``.

        Its name is ``client/FUNCTION_NAME`` unless ``name`` is given; its input schema
        is inferred from its type hints, and its description and parameter descriptions
        from its docstring (``input_schema`` and ``description`` override them). It is
        called with the model's arguments as keywords, sync or async. Registration is
        sent at once and awaited by the next ``run()`` (or ``await tools_ready()``);
        the function is returned unchanged."""

        def register(target: F) -> F:
            doc, schema = ("", {}) if input_schema is not None else function_schema(target)
            if input_schema is not None:
                schema = dict(input_schema)
            text = description if description is not None else doc or inspect.getdoc(target)
            tool_name = name or f"client/{target.__name__}"

            async def call(arguments: dict[str, Any]) -> Any:
                output = target(**arguments)
                return await output if inspect.isawaitable(output) else output

            registration = self.register_tool(
                tool_name, text or tool_name, schema, call,
                annotations=annotations, timeout_ms=timeout_ms,
            )  # fmt: skip
            self._registering.append(asyncio.ensure_future(registration))
            return target

        return register(function) if function is not None else register

    async def tools_ready(self) -> None:
        """Wait for the ``@client.tool`` registrations sent so far; raises the first error."""
        pending, self._registering = self._registering, []
        if pending:
            results = await asyncio.gather(*pending, return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result

    async def list_tools(self) -> list[dict[str, Any]]:
        result = await self.connection.request(m.TOOLS_LIST, {})
        return list(result["tools"])

    async def _on_tools_call(self, params: dict[str, Any]) -> Any:
        function = self._tools.get(str(params.get("name")))
        if function is None:
            raise RpcError(JsonRpcCode.METHOD_NOT_FOUND, f"no client tool {params.get('name')!r}")
        arguments = dict(params.get("arguments") or {})
        try:
            output = function(arguments)
            if asyncio.iscoroutine(output) or isinstance(output, asyncio.Future):
                output = await output
        except Exception as exc:  # noqa: BLE001 - a failing tool is a failed record, by design
            return {"output": f"{type(exc).__name__}: {exc}", "isError": True}
        return {"output": output}

    async def _on_permission(self, params: dict[str, Any]) -> Any:
        """The handler's answer; one that raises or is malformed refuses this call,
        cancels the run, and is raised from that run's ``run()``."""
        if self.permission_handler is None:
            return {"outcome": "reject_once"}
        try:
            answer = self.permission_handler(params)
            if inspect.isawaitable(answer):
                answer = await answer
            return {"outcome": permission_outcome(answer)}
        except Exception as exc:  # noqa: BLE001 - re-raised from run(), at the caller
            run_id = str(params.get("runId"))
            self._handler_errors.setdefault(run_id, exc)
            self._send_cancel(run_id)
            return {"outcome": "reject_once"}

    async def _on_elicit(self, params: dict[str, Any]) -> Any:
        """The handler's answer to an MCP server's question; without a handler, or when
        it raises, the question is cancelled (the server is never given an answer the
        user did not give). The daemon checks the content against the server's schema."""
        if self.elicitation_handler is None:
            return {"action": "cancel"}
        try:
            answer = self.elicitation_handler(params)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception:  # noqa: BLE001 - the question is cancelled; the run goes on
            return {"action": "cancel"}
        if not isinstance(answer, Mapping) or answer.get("action") not in _ACTIONS:
            raise TypeError(
                "elicitation_handler must answer {'action': 'accept' | 'decline' | 'cancel', "
                f"'content'?: {{...}}}}, not {answer!r}"
            )
        return dict(answer)

    async def _on_llm_generate(self, params: dict[str, Any]) -> Any:
        if self.llm_handler is None:
            raise RpcError(
                JsonRpcCode.METHOD_NOT_FOUND, "this client lends no model (llm_handler is not set)"
            )
        reply = self.llm_handler(params)
        if not isinstance(reply, dict):
            reply = await reply
        return reply

    def send_llm_delta(self, run_id: str, iteration: int, text: str) -> None:
        """Stream text of the lent model while answering ``llm/generate``."""
        self.connection.notify(m.LLM_DELTA, {"runId": run_id, "iteration": iteration, "text": text})

    # -- runs --------------------------------------------------------------------------

    def on_event(self, callback: EventCallback) -> None:
        """Receive every run notification of this connection."""
        self._any_listeners.append(callback)

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method not in RUN_EVENTS:
            return
        for callback in self._any_listeners:
            callback(method, params)
        for callback in self._run_listeners.get(str(params.get("runId")), ()):
            callback(method, params)

    async def run(
        self, prompt: str, *, on_event: EventCallback | None = None, **params: Any
    ) -> dict[str, Any]:
        """Start a run and wait for its ``RunResult``.

        ``params`` are ``RunParams`` fields, by Python name (``max_iterations=3``) or
        wire name (``maxIterations=3``); any other keyword is a ``TypeError``. Cancelling
        the awaiting task sends ``run/cancel`` and waits (at most ``CANCEL_WAIT_S``) for
        the run to end, then raises ``CancelledError``."""
        fields = run_params(params)
        if fields.get("forkFrom") is not None:
            fields["forkFrom"] = fork_from_wire(fields["forkFrom"])
        await self.tools_ready()
        run_id = fields.setdefault("runId", os.urandom(8).hex())
        if on_event is not None:
            self._run_listeners.setdefault(run_id, []).append(on_event)
        _, future = self.connection.send_request(m.RUN_START, {"prompt": prompt, **fields})
        try:
            result: dict[str, Any] = await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():
                self._send_cancel(run_id)
                await asyncio.wait([future], timeout=CANCEL_WAIT_S)
            _consume(future)
            raise
        finally:
            self._run_listeners.pop(run_id, None)
            error = self._handler_errors.pop(run_id, None)
        if error is not None:
            raise error
        return result

    def _send_cancel(self, run_id: str) -> None:
        """``run/cancel`` without waiting for its reply (the run may have just ended)."""
        _, reply = self.connection.send_request(m.RUN_CANCEL, {"runId": run_id})
        reply.add_done_callback(_consume)

    async def cancel(self, run_id: str) -> None:
        await self.connection.request(m.RUN_CANCEL, {"runId": run_id})

    async def get(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.connection.request(m.RUN_GET, {"runId": run_id})
        return result

    async def list_runs(self) -> list[dict[str, Any]]:
        return list((await self.connection.request(m.RUN_LIST, {}))["runs"])

    # -- checkpoints -------------------------------------------------------------------

    async def diff(self, run_id: str, iteration: int | None = None) -> dict[str, Any]:
        """``run/diff``: what a run (or its iteration ``iteration``) changed in its
        workspace's files: ``{files: [{path, status, additions, deletions, binary}],
        patch}``."""
        params: dict[str, Any] = {"runId": run_id}
        if iteration is not None:
            params["iteration"] = iteration
        result: dict[str, Any] = await self.connection.request(m.RUN_DIFF, params)
        return result

    async def revert(
        self,
        run_id: str,
        *,
        to_iteration: int | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> dict[str, Any]:
        """``run/revert``: put the files a run changed back as they were before it (or
        after ``to_iteration``). A file changed since the run's last checkpoint is a
        conflict: nothing changes (``applied`` false) unless ``force``. The reply's
        ``restoreCheckpointId`` undoes it through :meth:`restore_checkpoint`."""
        params: dict[str, Any] = {"runId": run_id, "dryRun": dry_run, "force": force}
        if to_iteration is not None:
            params["toIteration"] = to_iteration
        result: dict[str, Any] = await self.connection.request(m.RUN_REVERT, params)
        return result

    async def restore_checkpoint(
        self, checkpoint_id: str, *, dry_run: bool = False, force: bool = False
    ) -> dict[str, Any]:
        """``checkpoint/restore``: put a workspace back as it was at a checkpoint, under
        the revert's conflict rules."""
        params = {"checkpointId": checkpoint_id, "dryRun": dry_run, "force": force}
        result: dict[str, Any] = await self.connection.request(m.CHECKPOINT_RESTORE, params)
        return result

    # -- MCP servers -------------------------------------------------------------------

    async def add_mcp_servers(self, servers: list[Mapping[str, Any]]) -> list[str]:
        """``mcp/add``: mount MCP servers daemon-wide (``McpServerEntry`` objects, wire
        names). Each starts in the background; runs wait for the ones still starting."""
        result = await self.connection.request(m.MCP_ADD, {"servers": [dict(s) for s in servers]})
        return list(result["added"])

    async def remove_mcp_servers(self, names: list[str]) -> list[str]:
        """``mcp/remove``: stop daemon-wide MCP servers and unmount their tools."""
        return list((await self.connection.request(m.MCP_REMOVE, {"names": names}))["removed"])

    async def mcp_servers(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """``mcp/servers``: each server's status (with ``run_id``, that run's own too)."""
        params = {} if run_id is None else {"runId": run_id}
        return list((await self.connection.request(m.MCP_SERVERS, params))["servers"])

    async def close(self, timeout: float = 5.0) -> int | None:
        """``shutdown`` + ``exit`` when possible, then wait for the process (bounded)."""
        if self.process.returncode is None and not self.connection.closed.is_set():
            with contextlib.suppress(RpcError, ConnectionError, TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.connection.request("shutdown")
                self.connection.notify("exit", {})
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        await self.connection.close()
        if self.stderr is not None:
            await self.stderr.drained(1.0)  # its last lines, unless a child still holds it
            await self.stderr.close()
        return self.process.returncode


def _consume(future: asyncio.Future[Any]) -> None:
    """Mark a future's outcome as seen, so an unanswered reply logs nothing at exit."""
    if future.done() and not future.cancelled():
        future.exception()


def fork_from_wire(value: Any) -> dict[str, Any]:
    """``run(fork_from=...)`` as the wire's ``forkFrom``: a ``ForkFrom``
    (``cleveragents.runs``) or a mapping with Python or wire names."""
    if isinstance(value, Mapping):
        get = value.get
        run_id, iteration = get("run_id", get("runId")), get("iteration")
        restore = get("restore_files", get("restoreFiles"))
    else:
        run_id = getattr(value, "run_id", None)
        iteration = getattr(value, "iteration", None)
        restore = getattr(value, "restore_files", None)
    if not isinstance(run_id, str) or not isinstance(iteration, int):
        raise TypeError("fork_from needs a run id (run_id) and an iteration (an int)")
    wire: dict[str, Any] = {"runId": run_id, "iteration": iteration}
    if restore is not None:
        wire["restoreFiles"] = bool(restore)
    return wire
