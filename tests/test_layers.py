"""The layers point down only, checked on the real import graph; every third-party
import is a declared dependency (README.md, "Layout", names the layers)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from inspect import getsourcefile
from pathlib import Path

import pytest

from cleveragents.llm import Provider, providers
from kit.paths import ROOT

PACKAGE = ROOT / "server" / "cleveragents"

# The two JSON-RPC faces stand on the same layers, and never on each other.
FACE = {"tool", "workspace", "llm", "protocol", "mcp", "transcripts", "runs", "rpc", "checkpoints"}
# Which sibling packages each layer may import.
ALLOWED: dict[str, set[str]] = {
    # Files under the state dir by descriptor: the standard library only, below every
    # layer that keeps files there.
    "statedir": set(),
    "tool": set(),
    "workspace": {"tool"},
    "checkpoints": {"tool", "workspace"},
    "llm": {"tool"},
    "protocol": {"tool"},
    "mcp": {"tool"},
    "transcripts": {"tool", "protocol"},
    # A run's checkpoints are the run service's: it snapshots, diffs and reverts.
    "runs": {"tool", "workspace", "llm", "mcp", "transcripts", "checkpoints"},
    "rpc": {"tool", "workspace", "protocol", "mcp", "runs"},
    "daemon": set(FACE),
    # The terminal is a face of the run service: `cleveragents run` runs the service and
    # the built-in tools in its own process, as the daemon does (no daemon, no pygls),
    # and scrubs its log lines with the model layer's filter.
    "client": {"tool", "protocol", "runs", "workspace", "llm", "checkpoints"},
    "acp": set(FACE),
}
for _layer in ("mcp", "transcripts", "runs", "rpc", "daemon", "client", "acp"):
    ALLOWED[_layer].add("statedir")
# The providers whose adapters stand on an SDK, as the provider table says.
SDK_PROVIDERS: list[Provider] = [p for p in providers() if p.package is not None]
PROVIDER_SDKS = (*(str(p.package) for p in SDK_PROVIDERS), "mcp", "httpx", "httpx2")
# The import names of what the core must never need: transports, wire codecs, provider
# SDKs and the HTTP stacks they stand on (httpx2 is what the installed SDKs import).
FORBIDDEN_IN_CORE = (
    "pygls", "lsprotocol", "cattrs", *PROVIDER_SDKS, "httpcore", "httpcore2", "rich",
)  # fmt: skip


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
            if layer == "tool" and any(
                module == name or module.startswith(name + ".") for name in FORBIDDEN_IN_CORE
            ):
                bad.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert bad == []


def test_starting_the_daemon_imports_no_provider_sdk() -> None:
    code = (
        "import sys; import cleveragents.daemon as d; d.create_server(); "
        f"print(sorted(m for m in {PROVIDER_SDKS!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _adapter_file(provider: Provider) -> str:
    """The module of a provider's adapter, relative to the package."""
    source = getsourcefile(provider.adapter) if provider.adapter is not None else None
    assert source is not None, provider.name
    return Path(source).resolve().relative_to(PACKAGE).as_posix()


# Files whose third-party imports must come from the base dependencies plus one extra:
# someone who installs only that extra gets a working package. An SDK provider's adapter
# module takes its provider's extra.
EXTRA_OF_FILE = {
    "mcp/": "mcp",
    **{_adapter_file(p): p.extra for p in SDK_PROVIDERS if p.extra is not None},
}


def test_the_provider_lists_are_the_provider_table_s() -> None:
    assert {"openai", "anthropic", "google.genai"} <= set(PROVIDER_SDKS)
    assert {"llm/builtin/openai.py": "openai", "llm/builtin/gemini.py": "gemini"}.items() <= (
        EXTRA_OF_FILE.items()
    )


def _declared_distributions(extra: str | None = None) -> set[str]:
    """The base dependencies plus ``extra`` (every extra when it is ``None``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    specs = list(project["dependencies"])
    for name, extra_specs in project.get("optional-dependencies", {}).items():
        if extra is None or name == extra:
            specs.extend(extra_specs)
    return {_normal(re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0]) for spec in specs}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_is_a_declared_dependency() -> None:
    """An import that only works because some SDK happens to pull the package in breaks
    the day that SDK changes its own dependencies: every one must be in pyproject.toml,
    and the MCP client's and each adapter's in their own extra."""
    providers = importlib.metadata.packages_distributions()
    undeclared = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        extra = next((e for prefix, e in EXTRA_OF_FILE.items() if where.startswith(prefix)), None)
        declared = _declared_distributions(extra)
        for module in imports_of(path):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in ("cleveragents", "__future__"):
                continue
            distributions = {_normal(d) for d in providers.get(top, [])}
            if not distributions & declared:
                undeclared.append(f"{where} imports {module}")
    assert undeclared == []


def test_test_modules_import_the_shared_kit_never_each_other() -> None:
    """Helpers shared across folders live in ``tests/kit``; a test module never imports
    another test module, nor a module of another test folder."""
    tests = ROOT / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("kit",)}
    bad = []
    for path in tests.rglob("*.py"):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import)
                else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else []
            )  # fmt: skip
            for name in names:
                top = name.split(".")[0]
                inside = tests.joinpath(*name.split(".")).with_suffix(".py").exists()
                if top.startswith("test_") or (
                    inside and top in folders and top != path.parent.name
                ):
                    bad.append(f"{path.relative_to(tests)} imports {name}")
    assert bad == []
