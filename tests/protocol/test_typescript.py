"""The TypeScript client: its generated protocol.ts is fresh, and its own suite passes
against the real daemon (run with this interpreter) whenever npm is on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from cleveragents._codegen import wire_errors
from cleveragents.protocol import METHODS, methods
from cleveragents.protocol._typescript import render_typescript
from kit.paths import TS_PACKAGE

PACKAGE = TS_PACKAGE
PROTOCOL_TS = PACKAGE / "src" / "protocol.ts"


def test_the_committed_protocol_ts_is_up_to_date() -> None:
    assert PROTOCOL_TS.read_text(encoding="utf-8") == render_typescript(wire_errors()), (
        "run scripts/gen-typescript and commit client-protocol/typescript/src/protocol.ts"
    )


def test_methods_use_the_python_constant_names_and_every_method_is_mapped() -> None:
    text = render_typescript(wire_errors())
    constants = {v: k for k, v in vars(methods).items() if k.isupper() and isinstance(v, str)}
    for method in METHODS:
        assert f'  {constants[method.name]}: "{method.name}",' in text
        maps = ["RequestParams", "RequestResults"] if method.kind == "request" else [
            "NotificationParams"]  # fmt: skip
        for name in maps:
            body = re.search(rf"export interface {name} \{{\n(.*?)\n\}}", text, re.S)
            assert body is not None
            assert f'  "{method.name}": ' in body.group(1)


def test_optional_fields_nullable_fields_and_literals_are_typed_as_on_the_wire() -> None:
    text = render_typescript(wire_errors())
    assert 'export type RunStatus = "completed" | "limit" | "cancelled" | "failed";' in text
    assert "  status: RunStatus;\n" in text
    assert "  error?: RunError;\n" in text  # OPTIONAL: absent, never null
    assert "  error: string | null;\n" in text  # ToolCallRecord.error: always sent
    assert "  output: unknown;\n" in text
    assert "  model?: string | Record<string, unknown>;\n" in text
    assert "export type EmptyParams = Record<string, never>;" in text


def _npm_ci_needed() -> bool:
    installed = PACKAGE / "node_modules" / ".package-lock.json"
    lock = PACKAGE / "package-lock.json"
    return not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime


# One worker runs the npm suites (see test_typescript_package.py).
@pytest.mark.xdist_group("npm")
@pytest.mark.timeout(240)
def test_the_typescript_client_suite_passes_against_the_real_daemon() -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not on PATH: the TypeScript client suite needs Node.js and npm")
    env = {**os.environ, "CLEVERAGENTS_PYTHON": sys.executable}
    if _npm_ci_needed():
        ci = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=PACKAGE, env=env,
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert ci.returncode == 0, f"npm ci failed:\n{ci.stdout[-4000:]}\n{ci.stderr[-4000:]}"
    test = subprocess.run(
        [npm, "test"], cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert test.returncode == 0, f"npm test failed:\n{test.stdout[-8000:]}\n{test.stderr[-4000:]}"
