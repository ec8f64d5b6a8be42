"""The TypeScript client as an extension gets it: packed from an unbuilt checkout, installed
from the tarball into a fresh npm project beside that project's own vscode-jsonrpc, then
imported and used against the real daemon. Skipped when npm is not on PATH.

Everything is written under pytest's tmp_path; npm reads its usual cache (--prefer-offline)
and keeps its logs in tmp_path too."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kit.paths import TS_PACKAGE

PACKAGE = TS_PACKAGE
NPM_FLAGS = ["--prefer-offline", "--no-audit", "--no-fund"]

# Run in the fresh project with: node check.js PYTHON WORKSPACE STATE_DIR. Prints one JSON
# line of findings; the test compares them, so a failure shows every finding at once.
CHECK_JS = r"""
const path = require("node:path");
const jsonrpc = require("vscode-jsonrpc");
const pkg = require("@cleveragents/client");

setTimeout(() => { console.error("check.js timed out"); process.exit(2); }, 30_000).unref();

(async () => {
  const [python, workspace, stateDir] = process.argv.slice(2);
  const pkgDir = path.dirname(require.resolve("@cleveragents/client/package.json"));
  const found = {
    oneVscodeJsonrpc:
      require.resolve("vscode-jsonrpc", { paths: [pkgDir] }) === require.resolve("vscode-jsonrpc"),
    sameResponseError: pkg.ResponseError === jsonrpc.ResponseError,
    sameCancellationToken: pkg.CancellationToken === jsonrpc.CancellationToken,
  };
  const client = await pkg.CleverAgentsClient.spawn({
    workspace, stateDir, command: [python, "-m", "cleveragents", "serve"],
    automationProfile: "trusted",
    model: { provider: "scripted", script: [
      { content: "greeting", toolCalls: [{ name: "client/greet", arguments: { who: "Ada" } }] },
      { content: "done" },
    ] },
  });
  try {
    try {
      await client.get("no-such-run");
      found.unknownRun = "resolved";
    } catch (error) {
      found.unknownRun = {
        instanceofResponseError: error instanceof jsonrpc.ResponseError,
        isRunNotFound: error.code === pkg.ErrorCodes.RunNotFoundError,
      };
    }
    await client.registerTool(
      { name: "client/greet", description: "Greet someone.", inputSchema: { type: "object" } },
      (args) => `hello ${args.who}`,
    );
    const events = [];
    const subscriptions = [
      client.onDidStartRun((e) => events.push(`started ${e.runId}`)),
      client.onDidToolCall((e) => events.push(`tool ${e.record.toolName} ${e.record.output}`)),
      client.onDidFinishRun((e) => events.push(`finished ${e.result.status}`)),
    ];
    const result = await client.run("Greet Ada", { runId: "packaged", maxIterations: 3 });
    subscriptions.forEach((s) => s.dispose());
    found.run = { status: result.status, content: result.content, events };
  } finally {
    found.exitCode = await client.close(5_000);
  }
  console.log(JSON.stringify(found));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
"""


def _npm(npm: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        [npm, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"npm {' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout


# The npm suites share one worker: two at once would fight over the cores (tsc, node and
# the daemons they start) and over npm's cache; test_typescript.py also writes
# node_modules/ and dist/ inside the package that test_typescript_package.py copies.
@pytest.mark.xdist_group("npm")
@pytest.mark.timeout(120)
def test_the_packed_tarball_installs_beside_the_projects_vscode_jsonrpc_and_runs(
    tmp_path: Path,
) -> None:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm is not on PATH: packing the TypeScript client needs Node.js and npm")
    env = {
        **os.environ,
        "npm_config_logs_dir": str(tmp_path / "npm-logs"),
        "npm_config_update_notifier": "false",
    }

    # An unbuilt checkout: no dist/, no node_modules/. `npm pack` must build it (prepare).
    checkout = tmp_path / "checkout"
    shutil.copytree(PACKAGE, checkout, ignore=shutil.ignore_patterns("node_modules", "dist"))
    _npm(npm, ["ci", "--ignore-scripts", *NPM_FLAGS], checkout, env, timeout=60)
    assert not (checkout / "dist").exists()
    packed = json.loads(
        _npm(npm, ["pack", "--json", "--pack-destination", str(tmp_path)], checkout, env, 60)
    )[0]
    files = {f["path"] for f in packed["files"]}
    assert {"package.json", "README.md", "dist/src/index.js", "dist/src/index.d.ts"} <= files
    unexpected = {
        f for f in files
        if f not in {"package.json", "README.md"} and not re.fullmatch(r"dist/src/[\w-]+\.(js|d\.ts)", f)
    }  # fmt: skip
    assert unexpected == set()

    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    jsonrpc_range = manifest["peerDependencies"]["vscode-jsonrpc"]
    assert "vscode-jsonrpc" not in manifest.get("dependencies", {})

    project = tmp_path / "extension"
    project.mkdir()
    _npm(npm, ["init", "-y"], project, env, timeout=30)
    tarball = tmp_path / packed["filename"]
    _npm(npm, ["install", *NPM_FLAGS, str(tarball), f"vscode-jsonrpc@{jsonrpc_range}"], project,
         env, timeout=60)  # fmt: skip
    installed = project / "node_modules" / "@cleveragents" / "client"
    assert (installed / "dist" / "src" / "index.js").is_file()
    assert not (installed / "node_modules").exists()  # no second vscode-jsonrpc

    (project / "check.js").write_text(CHECK_JS, encoding="utf-8")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    check = subprocess.run(
        [node, "check.js", sys.executable, str(workspace), str(tmp_path / "state")],
        cwd=project, env=env, capture_output=True, text=True, timeout=40, check=False,
    )  # fmt: skip
    assert check.returncode == 0, (
        f"check.js failed:\n{check.stdout[-4000:]}\n{check.stderr[-4000:]}"
    )
    found: dict[str, Any] = json.loads(check.stdout.strip().splitlines()[-1])
    assert found == {
        "oneVscodeJsonrpc": True,
        "sameResponseError": True,
        "sameCancellationToken": True,
        "unknownRun": {"instanceofResponseError": True, "isRunNotFound": True},
        "run": {
            "status": "completed",
            "content": "done",
            "events": ["started packaged", "tool client/greet hello Ada", "finished completed"],
        },
        "exitCode": 0,
    }
