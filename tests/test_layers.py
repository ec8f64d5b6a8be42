"""The layers point down only (design §2), checked on the real import graph."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "cleveragents"

# Which sibling packages each layer may import.
ALLOWED: dict[str, set[str]] = {
    "tool": set(),
    "workspace": {"tool"},
    "llm": {"tool"},
    "protocol": {"tool"},
    "mcp": {"tool"},
    "daemon": {"tool", "workspace", "llm", "protocol", "mcp"},
    "client": {"tool", "protocol"},
    "acp": {"tool", "workspace", "llm", "protocol", "daemon", "mcp"},
}
FORBIDDEN_IN_CORE = ("pygls", "lsprotocol", "openai", "anthropic", "httpx", "cattrs")


def imports_of(path: Path) -> set[str]:
    """Absolute module names imported by one file (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ["cleveragents", *path.relative_to(PACKAGE).parent.parts]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.add(".".join([*base, *(node.module.split(".") if node.module else [])]))
            elif node.module:
                found.add(node.module)
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(layer: str) -> None:
    bad = []
    for path in (PACKAGE / layer).rglob("*.py"):
        for module in imports_of(path):
            parts = module.split(".")
            inner = parts[1] if parts[0] == "cleveragents" and len(parts) > 1 else None
            if inner in ALLOWED and inner != layer and inner not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(PACKAGE)} imports {module}")
            if layer == "tool" and parts[0] in FORBIDDEN_IN_CORE:
                bad.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert bad == []


def test_starting_the_daemon_imports_no_provider_sdk() -> None:
    code = (
        "import sys; import cleveragents.daemon as d; d.create_server(); "
        "print(sorted(m for m in ('openai', 'anthropic', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_public_api_of_the_core_is_pinned() -> None:
    import cleveragents.tool as tool

    assert set(tool.__all__) >= {
        "ToolRegistry", "ToolRunner", "ToolCallRouter", "LLMCaller", "ToolActorContext",
        "ToolCallRecord", "ToolCallRunResult", "ToolCallingRuntime", "ToolSpec", "CancelToken",
        "EventSink",
    }  # fmt: skip
    assert all(hasattr(tool, name) for name in tool.__all__)
