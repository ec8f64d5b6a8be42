"""From listings to specs, and from results to outputs: the pure mapping, plus one
server whose listing holds tools the core cannot take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cleveragents.mcp import McpServerConfig
from cleveragents.mcp._link import RawResult
from cleveragents.mcp._tools import build_specs, error_text, kind_of, output_of, selected
from cleveragents.tool import CancelToken, ToolActorContext, ToolAnnotations, ToolCallContext
from kit.mcp import started, stdio
from kit.paths import PLAIN_SERVER

OBJECT: dict[str, Any] = {"type": "object"}


async def never_called(tool: str, arguments: dict[str, Any]) -> Any:
    raise AssertionError("not called")


def tool(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": OBJECT, **fields}


@pytest.mark.parametrize(
    ("hints", "trust", "kind", "annotations"),
    [
        (None, None, "write", ToolAnnotations()),
        ({"readOnlyHint": True}, None, "read", ToolAnnotations(read_only=True)),
        ({"readOnlyHint": False}, None, "write", ToolAnnotations()),
        ({"readOnlyHint": "yes"}, None, "write", ToolAnnotations()),  # only a real true
        ({"destructiveHint": True}, None, "write", ToolAnnotations(destructive=True)),
        ({"idempotentHint": True}, None, "write", ToolAnnotations(idempotent=True)),
        ({"readOnlyHint": True}, "write", "write", ToolAnnotations()),
        ({"destructiveHint": True}, "read", "read", ToolAnnotations(read_only=True)),
        (None, "execute", "execute", ToolAnnotations()),
    ],
)
def test_read_only_hint_gives_read_and_trust_overrides_it(
    hints: dict[str, Any] | None, trust: Any, kind: str, annotations: ToolAnnotations
) -> None:
    assert kind_of(hints, trust) == (kind, annotations)


@pytest.mark.parametrize(
    ("include", "exclude", "kept"),
    [
        (None, None, ["read_file", "write_file", "search"]),
        (("*_file",), None, ["read_file", "write_file"]),
        (("read_file", "search"), None, ["read_file", "search"]),
        (None, ("write_*",), ["read_file", "search"]),
        (("*_file",), ("write_file",), ["read_file"]),
        (("READ_FILE",), None, []),  # case-sensitive
    ],
)
def test_include_and_exclude_take_names_and_globs(
    include: tuple[str, ...] | None, exclude: tuple[str, ...] | None, kept: list[str]
) -> None:
    names = ["read_file", "write_file", "search"]
    assert [n for n in names if selected(n, include, exclude)] == kept


def test_specs_are_namespaced_by_server_and_bad_tools_are_skipped_with_a_reason() -> None:
    config = McpServerConfig("srv", command="x")
    tools = [
        tool("ok", description="Fine."),
        tool("has space"),
        tool("n" * 130),
        tool("typo", inputSchema={"type": "object", "properties": {"a": {"type": "nope"}}}),
        tool("not_object", inputSchema=["a"]),
        tool("ok"),
        {"inputSchema": OBJECT},
    ]
    specs, skipped = build_specs(config, tools, never_called)
    assert [spec.name for spec in specs] == ["mcp:srv/ok"]
    assert specs[0].description == "Fine."
    assert [line.split(":", 1)[0] for line in skipped] == [
        "has space", "n" * 130, "typo", "not_object", "ok", "None",
    ]  # fmt: skip
    assert "is not a valid tool name" in skipped[0]
    assert "input_schema.properties.a.type" in skipped[2]
    assert "lists this name twice" in skipped[4]


async def test_a_spec_handler_sends_the_models_arguments_without_reserved_keys() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []

    calls: list[ToolCallContext] = []

    async def record(name: str, arguments: dict[str, Any], call: ToolCallContext) -> Any:
        sent.append((name, arguments))
        calls.append(call)
        return "done"

    specs, _ = build_specs(McpServerConfig("s", command="x"), [tool("t")], record)
    context = ToolCallContext("c1", "mcp:s/t", 1, {}, ToolActorContext(), CancelToken())
    inputs = {"a": 1, "sandbox_root": "/r", "resource_bindings": {}}
    assert await specs[0].handler(inputs, context) == "done"
    assert sent == [("t", {"a": 1})]
    assert calls == [context]  # the server's requests meanwhile are about this call


@pytest.mark.parametrize(
    ("result", "output"),
    [
        (RawResult({"n": 1}, [{"type": "text", "text": "{}"}], False), {"n": 1}),
        (RawResult(None, [{"type": "text", "text": "hello"}], False), "hello"),
        (RawResult([], [], False), []),
        (RawResult(None, [], False), []),
        (
            RawResult(None, [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], False),
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        ),
        (
            RawResult(None, [{"type": "image", "data": "AA==", "mimeType": "image/png"}], False),
            [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
        ),
    ],
)
def test_the_output_is_structured_content_else_one_text_else_the_blocks(
    result: RawResult, output: Any
) -> None:
    assert output_of(result) == output


def test_the_error_of_is_error_is_the_servers_text() -> None:
    assert error_text(RawResult(None, [{"type": "text", "text": "no such file"}], True)) == (
        "no such file"
    )
    assert error_text(RawResult(None, [{"type": "image", "data": "AA=="}], True)) == (
        '[{"type": "image", "data": "AA=="}]'
    )
    assert error_text(RawResult(None, [], True)) == (
        "the tool reported an error without saying what it was"
    )


async def test_a_server_with_unusable_tools_is_ready_with_the_others(tmp_path: Path) -> None:
    async with started(stdio("p", PLAIN_SERVER, "--bad-tools"), tmp_path) as server:
        assert server.status == "ready", server.error
        assert [spec.name for spec in server.tool_specs()] == [
            "mcp:p/echo", "mcp:p/crash", "mcp:p/noisy",
        ]  # fmt: skip
        assert [line.split(":", 1)[0] for line in server.skipped] == [
            "bad schema", "typo", "n" * 130,
        ]  # fmt: skip
