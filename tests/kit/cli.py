"""Running the real ``cleveragents`` command in tests, with a clean environment, and reading
the transcripts it leaves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cleveragents.transcripts import TranscriptStore

COMMAND = [sys.executable, "-m", "cleveragents"]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment with no model, profile or state dir set, and a private config dir."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CLEVERAGENTS_") and k != "NO_COLOR"}  # fmt: skip
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env.update(extra)
    return env


def cli(
    tmp_path: Path, *args: str, input: str | None = None, cwd: Path | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, timeout=60, input=input,
        env=clean_env(tmp_path, **env), cwd=cwd or tmp_path,
    )  # fmt: skip


def runs(state: Path) -> list[dict[str, Any]]:
    """The RunSummary of each run in ``state``, newest first."""
    return TranscriptStore(state).summaries()


def meta(state: Path, run_id: str) -> dict[str, Any]:
    return next(iter(TranscriptStore(state).events(run_id)))["params"]


def spawn_json_run(tmp_path: Path, model: str) -> subprocess.Popen[str]:
    """``cleveragents run go --json --yes -m MODEL`` in ``tmp_path``, its output piped:
    for tests that act while the run goes on (a signal, a FIFO)."""
    return subprocess.Popen(
        [*COMMAND, "run", "go", "--json", "--yes", "-m", model,
         "--state-dir", str(tmp_path / "state")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(tmp_path),
        cwd=tmp_path,
    )  # fmt: skip
