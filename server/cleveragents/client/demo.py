"""``cleveragents demo``: a scripted run on a sample workspace, through a real daemon.

It spawns ``cleveragents serve`` on a temporary copy of the sample workspace, registers
one client tool (``client/show-message``), approves the edit as an editor would, and
shows the run with the same view as ``cleveragents run`` (live on a terminal), then the
edit as a diff. The model is the embedded scripted one: no key, no network. The
transcript goes to the state dir, so ``cleveragents runs show`` finds the run later.
Everything the demo prints from the run passes through ``_terminal``.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._client import Client
from ._terminal import printable
from ._views import Output, View

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


NEXT = (
    "Next: run your own prompt against a real model (the openai extra: "
    "pip install 'cleveragents[openai]'; docs/cli.md says more), e.g.\n"
    '  OPENAI_API_KEY=... cleveragents run -m openai:gpt-4o-mini "explain this project"\n'
    '  cleveragents run -m \'{"provider": "openai", "model": "llama3.1", '
    '"baseUrl": "http://localhost:11434/v1"}\' "explain this project"'
)


def _view() -> View:
    out = Output(sys.stdout)
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        from ._live import LiveView

        return LiveView(out)
    return View(out)


async def _demo(workspace: Path, state_dir: Path) -> int:
    view = _view()
    before = (workspace / "src/greet.py").read_text(encoding="utf-8")
    async with await Client.spawn(
        workspace, model={"provider": "scripted", "script": SCRIPT}, state_dir=state_dir,
        permissions=True, on_stderr=view.daemon_line,
    ) as client:  # fmt: skip

        @client.tool(name="client/show-message", annotations={"readOnly": True})
        def show_message(text: str) -> dict[str, Any]:
            """Show a message in the editor."""
            view.aside(f"(editor) message shown: {text}")
            return {"shown": True}

        def approve(request: dict[str, Any]) -> str:
            view.aside(f"(editor) {request['toolName']} approved: {request['reason']}")
            return "allow_once"

        client.permission_handler = approve
        view.start()
        try:
            result = await client.run("Fix the greeting in the sample project.",
                                      on_event=view.event)  # fmt: skip
        finally:
            view.stop()
    after = (workspace / "src/greet.py").read_text(encoding="utf-8")
    view.diff(list(difflib.unified_diff(
        before.splitlines(), after.splitlines(), "a/src/greet.py", "b/src/greet.py", lineterm=""
    )))  # fmt: skip
    view.finish(result, state_dir / "runs" / f"{result['runId']}.jsonl")
    print(printable(f"\nSee it again: cleveragents runs show {result['runId']}"))
    print(NEXT)
    return 0 if result["status"] == "completed" else 1


def run_demo(state_dir: Path, workspace: Path | None = None) -> int:
    """The demo on ``workspace`` (default: a temporary copy of the sample project)."""
    with tempfile.TemporaryDirectory(prefix="cleveragents-demo-") as tmp:
        target = workspace or Path(tmp) / "workspace"
        if workspace is None:
            shutil.copytree(SAMPLE, target)
        return asyncio.run(_demo(target.resolve(), state_dir))
