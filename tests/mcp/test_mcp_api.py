"""The public surface of ``cleveragents.mcp``, its layering, its cheap import, and the
stderr log's tail."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import cleveragents.mcp as mcp_core
from cleveragents.mcp import _logfile
from cleveragents.mcp._logfile import ServerLog
from cleveragents.tool import ToolError

PACKAGE = Path(mcp_core.__file__).resolve().parent


def test_the_public_api_is_pinned() -> None:
    assert set(mcp_core.__all__) == {
        "RESTARTS_PER_MINUTE", "SDK_MISSING", "SERVER_NAME_PATTERN", "McpConfigError",
        "McpServer", "McpServerConfig", "McpToolError", "ProtocolVersion", "Scope", "Status",
        "Transport", "Trust", "mcp_available", "OAuthConfig", "TokenStore",
        "NO_HOOKS", "ClientHooks", "ElicitAction", "ElicitMode", "Elicitation", "ElicitationAnswer",
        "Sampling", "SamplingAnswer", "SamplingRefused", "IdentityProviderConfig",
        "secret_variable", "idp_secret_variable",
    }  # fmt: skip
    assert all(hasattr(mcp_core, name) for name in mcp_core.__all__)
    assert issubclass(mcp_core.McpToolError, ToolError)


def test_importing_the_package_imports_no_sdk_and_works_without_it() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import cleveragents.mcp as m\n"
        "print(m.mcp_available(), sorted(n for n in ('mcp_types', 'anyio', 'httpx2', 'pygls',"
        " 'lsprotocol', 'cleveragents.daemon', 'cleveragents.protocol') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False []"


def test_no_module_of_the_package_imports_pygls_or_lsprotocol() -> None:
    bad = []
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )  # fmt: skip
            bad += [
                f"{path.name}: {n}" for n in names if n.split(".")[0] in ("pygls", "lsprotocol")
            ]
    assert bad == []


def test_the_tail_holds_only_what_the_current_process_wrote(tmp_path: Path) -> None:
    log = ServerLog(tmp_path / "logs" / "s.log")
    assert log.tail() is None
    with log.open_for_child("first") as file:
        file.write(b"old line\n")
    with log.open_for_child("second") as file:
        assert log.tail() is None
        file.write(b"".join(f"line {i}\n".encode() for i in range(25)))
    assert log.tail() == "\n".join(f"line {i}" for i in range(5, 25))
    text = (tmp_path / "logs" / "s.log").read_text()
    for part in ("old line", "starting first", "starting second"):
        assert part in text


def test_the_tail_is_at_most_4_kib(tmp_path: Path) -> None:
    log = ServerLog(tmp_path / "s.log")
    with log.open_for_child("s") as file:
        file.write(b"y" * 10_000 + b"\nlast\n")
    tail = log.tail()
    assert tail is not None
    assert len(tail.encode()) <= 4096
    assert tail.endswith("\nlast")


def test_a_big_log_is_rotated_when_the_server_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_logfile, "ROTATE_BYTES", 100)
    log = ServerLog(tmp_path / "s.log")
    with log.open_for_child("s") as file:
        file.write(b"z" * 200 + b"\n")
    with log.open_for_child("s"):
        pass
    assert (tmp_path / "s.log.1").stat().st_size > 200
    assert (tmp_path / "s.log").stat().st_size < 100
