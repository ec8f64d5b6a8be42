"""The client command of the official MCP conformance suite: ``adapter.py SERVER_URL``.

The suite starts a scenario's MCP server (and, for ``auth/*``, its authorization
server) and runs this with the server's URL. It drives the real daemon
(``python -m cleveragents serve``) over its LSP wire as an editor would: it mounts the
URL as an MCP server (mapping ``MCP_CONFORMANCE_CONTEXT``'s pre-registered client to the
entry's ``oauth``), answers ``window/showDocument`` as a browser would (a GET that
follows redirects, to the daemon's loopback callback), accepts ``mcp/elicit`` with the
schema's defaults, waits for the server to be ready, and calls the scenario's tool
through a run of the scripted model. Exit 0 when the daemon did all that; the suite
judges what its servers saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

NAME = "conformance"
READY_TIMEOUT_S = 25.0
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
TOOLS = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


def entry(url: str, scenario: str, context: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """The server's entry, with ``oauth`` as a user would configure this scenario."""
    server: dict[str, Any] = {"name": NAME, "url": url, "trust": "read"}
    if not scenario.startswith("auth/"):
        return server
    oauth: dict[str, Any] = {"clientMetadataUrl": CLIENT_METADATA_URL}
    if context.get("client_id"):
        oauth["clientId"] = context["client_id"]
    if context.get("client_secret"):
        oauth["clientSecret"] = context["client_secret"]
    if scenario.startswith("auth/cross-app-access"):
        # Enterprise-managed: the person's ID token from their single sign-on, in a file.
        id_token = scratch / "id-token"
        id_token.write_text(context["idp_id_token"])
        id_token.chmod(0o600)
        oauth = {
            "grant": "identity_assertion",
            "clientId": context["client_id"],
            "clientSecret": context["client_secret"],
            "idp": {
                "clientId": context["idp_client_id"],
                "issuer": context["idp_issuer"],
                "tokenEndpoint": context["idp_token_endpoint"],
                "idTokenFile": str(id_token),
            },
        }
    elif scenario.startswith("auth/client-credentials"):
        oauth = {"grant": "client_credentials", "clientId": context["client_id"]}
        if "private_key_pem" in context:
            key = scratch / "client-key.pem"
            key.write_text(context["private_key_pem"])
            key.chmod(0o600)
            oauth["privateKeyFile"] = str(key)
            oauth["signingAlgorithm"] = context.get("signing_algorithm", "ES256")
        else:
            oauth["clientSecret"] = context["client_secret"]
    server["oauth"] = oauth
    return server


class Daemon:
    """The daemon over stdio with LSP framing: requests, and the daemon's own requests
    answered as an editor (and its user's browser) would."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = 0
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.opened: list[str] = []
        self.answering: set[asyncio.Future[None]] = set()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any) -> Any:
        self.ids += 1
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[self.ids] = answer
        self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        return await answer

    async def read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = 0
            while (line := await stdout.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            message = json.loads(await stdout.readexactly(length))
            if "method" in message and "id" in message:
                task = asyncio.ensure_future(self.answer(message))
                self.answering.add(task)
                task.add_done_callback(self.answering.discard)
            elif "id" in message and message["id"] in self.waiting:
                future = self.waiting.pop(message["id"])
                if "error" in message:
                    future.set_exception(RuntimeError(json.dumps(message["error"])))
                else:
                    future.set_result(message.get("result"))

    async def answer(self, message: dict[str, Any]) -> None:
        method, params = message["method"], message.get("params") or {}
        result: Any = None
        if method == "window/showDocument":
            self.opened.append(params["uri"])
            await asyncio.to_thread(browse, params["uri"])
            result = {"success": True}
        elif method == "mcp/elicit":
            schema = params.get("requestedSchema") or {}
            defaults = {
                key: spec["default"]
                for key, spec in (schema.get("properties") or {}).items()
                if isinstance(spec, dict) and "default" in spec
            }
            result = {"action": "accept", "content": defaults}
        elif method == "permission/request":
            result = {"outcome": "allow_once"}
        self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})


def browse(url: str) -> None:
    """What a browser does with the sign-in page: GET it and follow its redirects, the
    last one to the daemon's loopback callback."""
    with urllib.request.urlopen(url, timeout=20) as page:
        page.read()


async def main(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    scratch = Path(tempfile.mkdtemp(prefix="cleveragents-conformance-"))
    (scratch / "work").mkdir()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cleveragents", "serve",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    daemon = Daemon(process)
    reader = asyncio.ensure_future(daemon.read())
    try:
        await daemon.request("initialize", {
            "processId": os.getpid(),
            "rootUri": (scratch / "work").as_uri(),
            "capabilities": {
                "window": {"showDocument": {"support": True}},
                "experimental": {"cleveragents": {"permissions": True, "elicitation": True}},
            },
            "initializationOptions": {
                "stateDir": str(scratch / "state"),
                "mcpServers": [entry(url, scenario, context, scratch)],
            },
        })  # fmt: skip
        daemon.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        status = await ready(daemon)
        print(f"server {status['status']}: {status.get('error') or ''}", file=sys.stderr)
        if status["status"] != "ready":
            return 1
        if scenario == "initialize":
            return 0
        tool, arguments = TOOLS.get(scenario) or (await first_tool(daemon), {})
        model = {"provider": "scripted", "script": [
            {"toolCalls": [{"name": f"mcp:{NAME}/{tool}", "arguments": arguments}]},
            {"content": "done"},
        ]}  # fmt: skip
        result = await daemon.request("run/start", {"prompt": "go", "model": model})
        record = result["toolCallHistory"][0]
        print(f"{tool}: {json.dumps(record)[:500]}", file=sys.stderr)
        return 0 if record["success"] or scenario.startswith("auth/") else 1
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(daemon.request("shutdown", None), 10)
            daemon.send({"jsonrpc": "2.0", "method": "exit"})
            await asyncio.wait_for(process.wait(), 10)
        if process.returncode is None:
            process.kill()
        reader.cancel()


async def ready(daemon: Daemon) -> dict[str, Any]:
    """The server's status once it is no longer starting (a sign-in included)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_TIMEOUT_S
    while True:
        servers = (await daemon.request("mcp/servers", {}))["servers"]
        status: dict[str, Any] = servers[0]
        if status["status"] in ("ready", "failed") or loop.time() > deadline:
            return status
        await asyncio.sleep(0.1)


async def first_tool(daemon: Daemon) -> str:
    listed = (await daemon.request("tools/list", {}))["tools"]
    names = sorted(t["name"] for t in listed if t["name"].startswith(f"mcp:{NAME}/"))
    return str(names[0].partition("/")[2])


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1])))
