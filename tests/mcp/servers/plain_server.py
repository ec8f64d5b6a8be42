"""A hand-written MCP server: plain Python, newline-delimited JSON-RPC on stdio, no SDK.

``--era handshake`` (default) speaks only 2025-11-25: it answers ``initialize`` and
never answers ``server/discover`` (the case that costs the SDK's auto mode 10 s).
``--era modern`` speaks only 2026-07-28: it refuses ``initialize`` with
``--refuse-code`` (default -32601) and answers ``server/discover``.

``--record FILE`` appends ``started EPOCH`` when it starts, then every method it
receives, one per line. Tools: ``echo``
(text), ``crash`` (stderr line, exit 3), ``noisy`` (non-JSON lines on stdout, then an
answer). ``--bad-tools`` adds tools the client must skip (a name with a space, a
name too long, an inputSchema that is not a JSON Schema). It starts in a few tens of milliseconds, which keeps restart tests quick.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--era", choices=["handshake", "modern"], default="handshake")
parser.add_argument("--refuse-code", type=int, default=-32601)
parser.add_argument("--record", default="")
parser.add_argument("--bad-tools", action="store_true")
options = parser.parse_args()

MODERN = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {"name": "crash", "description": "Exit at once.", "inputSchema": {"type": "object"}},
    {"name": "noisy", "description": "Garbage, then an answer.", "inputSchema": {"type": "object"}},
]

BAD_TOOLS = [
    {"name": "bad schema", "inputSchema": {"type": "object"}},
    {"name": "typo", "inputSchema": {"type": "object", "properties": {"x": {"type": "nope"}}}},
    {"name": "n" * 130, "inputSchema": {"type": "object"}},
]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id: object, value: dict[str, object]) -> None:
    if options.era == "modern":
        value = {**value, **MODERN}
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id: object, code: int, message: str, data: object = None) -> None:
    body: dict[str, object] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    send({"jsonrpc": "2.0", "id": request_id, "error": body})


def text(request_id: object, value: str) -> None:
    result(request_id, {"content": [{"type": "text", "text": value}], "isError": False})


def call(request_id: object, params: dict[str, object]) -> None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    assert isinstance(arguments, dict)
    if name == "echo":
        text(request_id, str(arguments.get("text")))
    elif name == "crash":
        print("plain server: crashing now", file=sys.stderr, flush=True)
        os._exit(3)
    elif name == "noisy":
        sys.stdout.write("hello, I am not JSON\n\n[1, 2, 3]\n{broken json\n")
        sys.stdout.flush()
        text(request_id, "still here")
    else:
        error(request_id, -32602, f"Unknown tool: {name}")


if options.record:
    with open(options.record, "a") as record:
        record.write(f"started {time.time()}\n")

for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    request_id = message.get("id")
    if options.record and method:
        with open(options.record, "a") as record:
            record.write(f"{method}\n")
    if request_id is None or method is None:
        continue  # notifications and answers
    if method == "initialize":
        if options.era == "modern":
            error(request_id, options.refuse_code, "initialize is not supported",
                  {"supported": ["2026-07-28"], "requested": "2025-11-25"})  # fmt: skip
        else:
            result(request_id, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "plain", "version": "1"},
            })  # fmt: skip
    elif method == "server/discover":
        if options.era == "modern":
            result(request_id, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}})
        # the handshake-only server never answers it, like many deployed servers
    elif method == "tools/list":
        result(request_id, {"tools": TOOLS + (BAD_TOOLS if options.bad_tools else [])})
    elif method == "tools/call":
        call(request_id, message.get("params") or {})
    else:
        error(request_id, -32601, f"Method not found: {method}")
