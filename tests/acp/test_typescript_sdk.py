"""The official TypeScript client (``@agentclientprotocol/sdk`` 2.x) against the real
agent: ``tests/acp/ts/acp.test.mjs`` under node's test runner (skipped without npm)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TS = Path(__file__).resolve().parent / "ts"


# One worker runs the npm suites (see tests/protocol/test_typescript_package.py).
@pytest.mark.xdist_group("npm")
@pytest.mark.timeout(300)
def test_the_typescript_sdk_suite_passes() -> None:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm and node are needed for the TypeScript SDK suite")
    if not (TS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=TS, check=True, timeout=240)
    env = {**os.environ, "CLEVERAGENTS_PYTHON": sys.executable}
    done = subprocess.run(
        [node, "--test", "acp.test.mjs"], cwd=TS, env=env, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
