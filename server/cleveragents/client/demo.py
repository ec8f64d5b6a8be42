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
import contextlib
import difflib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..tool import PermissionOutcome
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

        def approve(request: dict[str, Any]) -> PermissionOutcome:
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


def run_demo(state_dir: Path, workspace: Path | None = None, protocol: str = "lsp") -> int:
    """The demo on ``workspace`` (default: a temporary copy of the sample project), over
    our own protocol (``lsp``) or the Agent Client Protocol (``acp``)."""
    with tempfile.TemporaryDirectory(prefix="cleveragents-demo-") as tmp:
        target = workspace or Path(tmp) / "workspace"
        if workspace is None:
            shutil.copytree(SAMPLE, target)
        demo = _acp_demo if protocol == "acp" else _demo
        return asyncio.run(demo(target.resolve(), state_dir))


# --------------------------------------------------------------------------- over ACP

ACP_SCRIPT: list[dict[str, Any]] = [
    {"content": "Reading the greeter.",
     "toolCalls": [{"name": "builtin/file-read", "arguments": {"path": "src/greet.py"}}]},
    {"content": "Fixing the typo.",
     "toolCalls": [{"name": "builtin/file-edit",
                    "arguments": {"path": "src/greet.py",
                                  "old_text": "Helo", "new_text": "Hello"}}]},
    {"content": "Fixed the typo in src/greet.py: it now greets with Hello."},
]  # fmt: skip
_ACP_TIMEOUT_S = 60.0


class _AcpEditor:
    """The editor's side of one ACP connection: its requests answered, everything the
    agent sends printed readably (through :func:`printable`)."""

    def __init__(self, proc: asyncio.subprocess.Process, workspace: Path) -> None:
        self.proc = proc
        self.workspace = workspace
        self._ids = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._titles: dict[str, str] = {}

    def show(self, text: str) -> None:
        print(printable(text), flush=True)

    def _rel(self, path: object) -> str:
        with contextlib.suppress(ValueError, TypeError):
            return str(Path(str(path)).relative_to(self.workspace))
        return str(path)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self._ids += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = future
        self._send({"id": self._ids, "method": method, "params": params})
        reply = await future
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error'].get('message')}")
        return reply["result"]

    async def read(self) -> None:
        assert self.proc.stdout is not None
        while raw := await self.proc.stdout.readline():
            message = json.loads(raw)
            if "method" not in message:
                future = self._pending.pop(message.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(message)
            elif "id" in message:
                result = self._answer(message["method"], message.get("params") or {})
                self._send({"id": message["id"], "result": result})
            elif message["method"] == "session/update":
                self._update(message["params"]["update"])
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the agent closed its output"))

    def _answer(self, method: str, params: dict[str, Any]) -> Any:
        path = Path(str(params.get("path")))
        if method == "session/request_permission":
            options = ", ".join(o["name"] for o in params["options"])
            self.show(f"<- session/request_permission: {params['toolCall']['title']}?"
                      f" [{options}]")  # fmt: skip
            self.show("-> the user picks: Allow (allow_once)")
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        if method == "fs/read_text_file":
            self.show(f"<- fs/read_text_file {self._rel(path)}: the editor answers from its buffer")
            return {"content": path.read_text(encoding="utf-8")}
        if method == "fs/write_text_file":
            content = params["content"]
            self.show(f"<- fs/write_text_file {self._rel(path)} ({len(content)} characters): "
                      "the editor shows it for review and saves it")  # fmt: skip
            path.write_text(content, encoding="utf-8")
            return {}
        raise ValueError(f"{method} is not offered by this editor")

    def _update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self.show(f"<- agent: {update['content'].get('text', '')}")
        elif kind == "tool_call":
            self._titles[update["toolCallId"]] = update["title"]
            self.show(f"<- tool call [{update['status']}] {update['title']} ({update['kind']})")
        elif kind == "tool_call_update":
            title = self._titles.get(update["toolCallId"], update["toolCallId"])
            self.show(f"<- tool call update [{update.get('status')}] {title}")
            for item in update.get("content") or []:
                if item.get("type") == "diff":
                    old = (item.get("oldText") or "").splitlines()
                    name = self._rel(item["path"])
                    for line in difflib.unified_diff(
                        old, item["newText"].splitlines(), f"a/{name}", f"b/{name}", lineterm=""
                    ):
                        self.show(f"     {line}")
                elif item.get("type") == "content" and update.get("status") == "failed":
                    self.show(f"     {item['content'].get('text', '')}")
        else:
            self.show(f"<- session/update: {kind}")


async def _acp_demo(workspace: Path, state_dir: Path) -> int:
    command = [
        sys.executable, "-m", "cleveragents", "serve", "--protocol", "acp",
        "--model", json.dumps({"provider": "scripted", "script": ACP_SCRIPT}),
        "--state-dir", str(state_dir),
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, limit=64 * 1024 * 1024,
    )  # fmt: skip
    editor = _AcpEditor(proc, workspace)
    reading = asyncio.ensure_future(editor.read())
    show = editor.show
    try:
        async with asyncio.timeout(_ACP_TIMEOUT_S):
            fs = {"readTextFile": True, "writeTextFile": True}
            show("-> initialize (the editor offers fs/read_text_file and fs/write_text_file)")
            info = await editor.request(
                "initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": fs}}
            )
            agent = info["agentInfo"]
            show(f"<- {agent['name']} {agent['version']}, ACP v{info['protocolVersion']}")
            show(f"-> session/new in {workspace}")
            session = await editor.request("session/new", {"cwd": str(workspace), "mcpServers": []})
            show(f"<- session {session['sessionId']} (mode {session['modes']['currentModeId']})")
            prompt = "Fix the greeting in the sample project."
            show(f"-> session/prompt: {prompt}")
            answer = await editor.request("session/prompt", {
                "sessionId": session["sessionId"], "prompt": [{"type": "text", "text": prompt}],
            })  # fmt: skip
            show(f"<- session/prompt answered: stopReason {answer['stopReason']}")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            async with asyncio.timeout(10):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await reading
    print(NEXT)
    return 0 if answer["stopReason"] == "end_turn" else 1
