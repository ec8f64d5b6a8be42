"""``cleveragents demo``: a scripted run on a sample workspace, through a real daemon.

It spawns ``cleveragents serve`` on a temporary copy of the sample workspace, registers
one client tool (``client/show-message``), answers permission requests, and prints every
notification as it streams. The model is the embedded scripted one: no key, no network.
Its ``describe`` is also how ``cleveragents run`` draws a notification; every line it
returns, and everything else the demo prints from the run, passes through ``_terminal``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..protocol import methods as m
from ._client import Client
from ._terminal import printable

SAMPLE = Path(__file__).resolve().parent.parent / "demo_workspace"

SCRIPT: list[dict[str, Any]] = [
    {"content": "Let me see what is in the workspace.",
     "toolCalls": [{"name": "builtin/file-list", "arguments": {"pattern": "**/*"}}]},
    {"content": "Reading the greeter and looking for TODOs.",
     "toolCalls": [{"name": "builtin/file-read", "arguments": {"path": "src/greet.py"}},
                   {"name": "builtin/file-search", "arguments": {"pattern": "TODO"}}]},
    {"content": "Fixing the typo.",
     "toolCalls": [{"name": "builtin/file-edit",
                    "arguments": {"path": "src/greet.py",
                                  "old_text": "Helo", "new_text": "Hello"}}]},
    {"content": "Telling the editor.",
     "toolCalls": [{"name": "client/show-message",
                    "arguments": {"text": "src/greet.py: greeting fixed"}}]},
    {"content": "Fixed the typo in src/greet.py and told the editor."},
]  # fmt: skip


def _short(value: Any, width: int = 90) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(method: str, params: dict[str, Any], root: str | None = None) -> str:
    """One line per notification, as an IDE panel would draw it (paths under ``root``
    shown relative to it, to keep lines short), safe to print: the model controls most
    of it (text, tool names, inputs, outputs, errors)."""
    if root:
        prefix = json.dumps(root.rstrip("/") + "/")[1:-1]  # as it appears inside JSON text
        params = json.loads(json.dumps(params).replace(prefix, ""))
    return printable(_describe(method, params))


def _describe(method: str, params: dict[str, Any]) -> str:
    head = f"[{params.get('seq'):>2}] {method:<20}"
    if method == m.RUN_STARTED:
        return f"{head} sandbox={params['sandboxRoot']} tools={len(params['tools'])}"
    if method == m.RUN_MESSAGE_DELTA:
        return f"{head} iteration {params['iteration']}: {_short(params['text'])}"
    if method == m.RUN_TOOL_CALL_STARTED:
        return f"{head} {params['toolName']} {_short(params['inputs'], 60)}"
    if method == m.RUN_TOOL_CALL:
        r = params["record"]
        outcome = "ok" if r["success"] else f"FAILED: {r['error']}"
        return (
            f"{head} {r['toolName']} iteration={r['iteration']} {r['durationMs']:.1f} ms "
            f"{outcome} -> {_short(r['output'], 60)}"
        )
    if method == m.RUN_ITERATION:
        return (
            f"{head} iteration {params['iteration']} done, {params['toolCallCount']} tool call(s)"
        )
    if method == m.RUN_FINISHED:
        return f"{head} status={params['result']['status']}"
    return f"{head} {_short(params)}"


async def _demo(workspace: Path, state_dir: Path) -> int:
    async with await Client.spawn(
        workspace, model={"provider": "scripted", "script": SCRIPT}, state_dir=state_dir,
        permissions=True,
    ) as client:  # fmt: skip
        shown: list[str] = []

        def show_message(arguments: dict[str, Any]) -> dict[str, Any]:
            shown.append(str(arguments.get("text")))
            print(printable(f"     (editor) message shown: {arguments.get('text')}"))
            return {"shown": True}

        def approve(request: dict[str, Any]) -> str:
            print(
                printable(
                    f"     (editor) permission for {request['toolName']}: "
                    f"{request['reason']} -> allow_once"
                )
            )
            return "allow_once"

        client.permission_handler = approve
        await client.register_tool(
            "client/show-message", "Show a message in the editor.",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            show_message, annotations={"readOnly": True},
        )  # fmt: skip
        print(
            f"daemon up: protocol v{client.capabilities['protocolVersion']}, workspace {workspace}"
        )
        result = await client.run(
            "Fix the greeting in the sample project.",
            on_event=lambda method, params: print(
                describe(method, params, str(workspace)), flush=True
            ),
        )
        print()
        print(f"status:      {result['status']}")
        print(printable(f"content:     {result['content']}"))
        print(f"iterations:  {result['iterations']}")
        print(f"tool calls:  {len(result['toolCallHistory'])}")
        last_line = (workspace / "src/greet.py").read_text().splitlines()[-1].strip()
        print(printable(f"greet.py now: {last_line}"))
        print(f"transcript:  {state_dir / 'runs' / (result['runId'] + '.jsonl')}")
        return 0 if result["status"] == "completed" else 1


def run_demo(workspace: Path | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="cleveragents-demo-") as tmp:
        target = workspace or Path(tmp) / "workspace"
        if workspace is None:
            shutil.copytree(SAMPLE, target)
        return asyncio.run(_demo(target.resolve(), Path(tmp) / "state"))
