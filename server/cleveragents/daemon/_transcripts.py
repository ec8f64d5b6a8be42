"""Run transcripts: ``STATE_DIR/runs/RUN_ID.jsonl``, one line per event, written as it happens.

Each line is ``{"method": ..., "params": ...}`` with the same payload the notification
carried. A line goes to the file in one ``write`` on an ``O_APPEND`` descriptor (no
user-space buffer), so a crash loses at most the line being written. Reading back takes
the ``run/finished`` result when there is one, and rebuilds a partial result otherwise.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..tool import RunNotFoundError

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
META = "$/meta"
"""The first line of a transcript: what the notifications do not carry (prompt, time)."""


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "cleveragents"


class Transcript:
    """The open transcript of one active run."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def append(self, method: str, params: Any) -> None:
        self.append_raw(method, json.dumps(params, ensure_ascii=False))

    def append_raw(self, method: str, params_text: str) -> None:
        """Append a line whose params are already JSON text (serialised once per event)."""
        if self._fd is None:
            return
        line = f'{{"method":{json.dumps(method)},"params":{params_text}}}\n'
        os.write(self._fd, line.encode("utf-8"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class TranscriptStore:
    """Where transcripts live; opens new ones and reads old ones back."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.runs_dir = state_dir / "runs"

    def open(self, run_id: str) -> Transcript:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        return Transcript(self.path(run_id))

    def path(self, run_id: str) -> Path:
        if not RUN_ID_PATTERN.match(run_id):
            raise RunNotFoundError(f"invalid run id {run_id!r}")
        return self.runs_dir / f"{run_id}.jsonl"

    def exists(self, run_id: str) -> bool:
        return RUN_ID_PATTERN.match(run_id) is not None and self.path(run_id).exists()

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """The events of a transcript; a torn last line (a crash mid-write) is skipped."""
        path = self.path(run_id)
        try:
            handle = path.open(encoding="utf-8")
        except FileNotFoundError:
            raise RunNotFoundError(f"unknown run {run_id!r}") from None
        with handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(event, dict) and isinstance(event.get("params"), dict):
                    yield event

    def result(self, run_id: str) -> dict[str, Any]:
        """The run's ``RunResult`` as wire data, finished or rebuilt from a partial log."""
        started: dict[str, Any] | None = None
        records: list[Any] = []
        iterations = 0
        content = ""
        for event in self.events(run_id):
            method, params = event.get("method"), event["params"]
            if method == "run/finished" and isinstance(params.get("result"), dict):
                return dict(params["result"])
            if method == "run/started":
                started = params
            elif method == "run/toolCall":
                records.append(params.get("record"))
            elif method == "run/iteration":
                iterations = max(iterations, int(params.get("iteration", 0)))
                content = str(params.get("content", ""))
        if started is None:
            raise RunNotFoundError(f"transcript of run {run_id!r} is empty")
        return {
            "runId": run_id,
            "status": "failed",
            "content": content,
            "toolCallHistory": records,
            "iterations": iterations,
            "terminatedByLimit": False,
            "durationMs": 0.0,
            "error": {"code": -32603, "message": "the daemon stopped before the run finished"},
        }

    def summaries(self) -> list[dict[str, Any]]:
        """A ``RunSummary`` (wire data) per transcript on disk, newest first. Blocking I/O:
        the daemon calls it in a worker thread."""
        if not self.runs_dir.is_dir():
            return []
        out = []
        for path in self.runs_dir.glob("*.jsonl"):
            run_id = path.stem
            meta: dict[str, Any] = {}
            for event in self.events(run_id):
                if event.get("method") == META:
                    meta = event["params"]
                break
            try:
                result = self.result(run_id)
            except RunNotFoundError:
                continue
            out.append(
                {
                    "runId": run_id,
                    "status": result.get("status", "failed"),
                    "prompt": str(meta.get("prompt", "")),
                    "startedAt": str(meta.get("startedAt", "")),
                    "iterations": int(result.get("iterations", 0)),
                    "toolCallCount": len(result.get("toolCallHistory") or []),
                    "active": False,
                }
            )
        out.sort(key=lambda s: s["startedAt"], reverse=True)
        return out
