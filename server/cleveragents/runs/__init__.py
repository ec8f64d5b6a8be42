"""The run service: runs, whatever face asked for them, with typed events.

    service = RunService(RunSettings(state_dir=..., workspace_folders=(root,)), tools)
    handle = await service.start(RunRequest(prompt="...", model="scripted:turns.json"))
    async for event in handle.events():   # RunStarted ... RunFinished
        ...
    result = await handle.result()
    await service.aclose()

It stands on the core (``cleveragents.tool``: the loop and the event classes), the
workspace (sandbox, profiles), the model adapters, MCP and the transcripts, and knows no
wire format: the LSP daemon, the ACP face and ``cleveragents run`` are faces that map
its events to what they show, and pass in what only they can do (ask the user, lend a
model, pace the run) as callbacks of the ``RunRequest``.
"""

from ._collector import POLICY as COLLECTOR
from ._collector import CollectorPolicy
from ._errors import CapabilityError, StateDirError
from ._mcp import McpServers, McpServerState
from ._mcp_hooks import Elicit, Elicitation, ElicitationAnswer, McpClientSide
from ._outputs import DEFAULT_MAX_TOOL_OUTPUT_BYTES, MAX_TOOL_OUTPUT_BYTES
from ._prepare import RunRequestError, model_spec, reserved
from ._process import PermissionPrompt, prepare_process
from ._request import AskUser, CompactionSettings, ForkFrom, RunRequest
from ._run import RunHandle, RunObserver
from ._service import RunService
from ._settings import DEFAULT_MAX_ITERATIONS, RunSettings

__all__ = [
    "COLLECTOR",
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_MAX_TOOL_OUTPUT_BYTES",
    "MAX_TOOL_OUTPUT_BYTES",
    "AskUser",
    "CapabilityError",
    "CollectorPolicy",
    "CompactionSettings",
    "Elicit",
    "Elicitation",
    "ElicitationAnswer",
    "ForkFrom",
    "McpClientSide",
    "McpServerState",
    "McpServers",
    "PermissionPrompt",
    "RunHandle",
    "RunObserver",
    "RunRequest",
    "RunRequestError",
    "RunService",
    "RunSettings",
    "StateDirError",
    "model_spec",
    "prepare_process",
    "reserved",
]
