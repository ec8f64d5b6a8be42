"""Running the real ``cleveragents`` command in tests, with a clean environment, and reading
the transcripts it leaves.

Each command runs in a session of its own, with stdin from /dev/null unless a test gives
it input: with no controlling terminal and nothing piped, it has nobody to ask and
nothing to read, whatever terminal the tests themselves were started from."""

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
        stdin=subprocess.DEVNULL if input is None else None, start_new_session=True,
        env=clean_env(tmp_path, **env), cwd=cwd or tmp_path,
    )  # fmt: skip


def workspace(tmp_path: Path) -> Path:
    """``tmp_path/ws``: a workspace that holds neither the state dir nor the scripts."""
    folder = tmp_path / "ws"
    folder.mkdir(exist_ok=True)
    return folder


def runs(state: Path) -> list[dict[str, Any]]:
    """The RunSummary of each run in ``state``, newest first."""
    return TranscriptStore(state).summaries()


def meta(state: Path, run_id: str) -> dict[str, Any]:
    return next(iter(TranscriptStore(state).events(run_id)))["params"]


def spawn_run(tmp_path: Path, model: str, *args: str) -> subprocess.Popen[str]:
    """``cleveragents run go --yes -m MODEL ARGS`` in ``tmp_path/ws`` (its state dir
    ``tmp_path/state``), its output piped: for tests that act while the run goes on (a
    signal, a FIFO, a closed pipe)."""
    return subprocess.Popen(
        [*COMMAND, "run", "go", "--yes", "-m", model, "--state-dir", str(tmp_path / "state"),
         *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env(tmp_path), cwd=workspace(tmp_path), start_new_session=True,
    )  # fmt: skip


def spawn_json_run(tmp_path: Path, model: str) -> subprocess.Popen[str]:
    """``spawn_run`` with ``--json``."""
    return spawn_run(tmp_path, model, "--json")
